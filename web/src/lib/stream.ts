/**
 * The one WebSocket client of the dashboard: it owns the socket to /v1/stream (authenticated by
 * the session cookie), reconnects with backoff after any drop, and resumes the open session after
 * the last seq it delivered — so a listener sees every frame once, in order, across drops and
 * reloads (the caller passes the seq it already has). Frames are typed by the server's schema.
 */
import type { ClientMessage, ServerFrame } from "../../../src/schema/stream.ts";

export type { ServerFrame };
export type StreamState = "connecting" | "open" | "closed";

type Listener = (f: ServerFrame) => void;

export class StreamClient {
  private ws: WebSocket | null = null;
  private sessionId: string | null = null;
  private lastSeq = 0;
  private queue: ClientMessage[] = [];
  private retry = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closedByUs = false;
  /** After a session.resume: live frames that overtake the replay are dropped (the replay brings them again). */
  private awaitingReplay = false;
  state: StreamState = "closed";
  onFrame: Listener = () => {};
  onState: (s: StreamState) => void = () => {};

  constructor(private url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/stream`) {}

  /** Follows a session from `after` (its replay, then live frames); reconnects keep following it. */
  follow(sessionId: string, after = 0) {
    this.sessionId = sessionId;
    this.lastSeq = after;
    this.resume();
  }

  private resume() {
    if (!this.sessionId) return;
    this.awaitingReplay = true;
    this.send({ type: "session.resume", session_id: this.sessionId, after: this.lastSeq });
  }

  /** Stops following (frames of other sessions are ignored anyway). */
  unfollow() {
    this.sessionId = null;
    this.lastSeq = 0;
    if (this.ws) {
      this.closedByUs = true;
      this.ws.close(1000);
      this.ws = null;
    }
  }

  send(msg: ClientMessage) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
    else {
      // A resume replaces an older one (the seq moves on); other messages wait in order.
      if (msg.type === "session.resume") this.queue = this.queue.filter((m) => m.type !== "session.resume");
      this.queue.push(msg);
      this.connect();
    }
  }

  private setState(s: StreamState) {
    this.state = s;
    this.onState(s);
  }

  private connect() {
    if (this.ws || this.timer) return;
    this.closedByUs = false;
    this.setState("connecting");
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => {
      this.retry = 0;
      this.setState("open");
      const pending = this.queue;
      this.queue = [];
      for (const m of pending) ws.send(JSON.stringify(m));
    };
    ws.onmessage = (m) => {
      let f: ServerFrame;
      try {
        f = JSON.parse(String(m.data));
      } catch {
        return;
      }
      if (f.type === "session.replay_start") this.awaitingReplay = false;
      if ("seq" in f && typeof f.seq === "number") {
        if (this.awaitingReplay && f.session_id === this.sessionId) return;
        if (f.session_id !== this.sessionId) {
          // A frame of a session we no longer follow, or (session.ready) the one just started.
          if (f.type !== "session.ready") return;
          this.sessionId = f.session_id;
          this.lastSeq = 0;
        }
        if (f.seq <= this.lastSeq) return; // already delivered (replay overlap after a reconnect)
        this.lastSeq = f.seq;
      }
      this.onFrame(f);
    };
    ws.onclose = (ev) => {
      if (this.ws === ws) this.ws = null;
      this.setState("closed");
      if (this.closedByUs || ev.code === 4001) return;
      // Back off 0.5 s, 1 s, 2 s … up to 10 s, then resume where we were.
      const wait = Math.min(10_000, 500 * 2 ** this.retry++);
      this.timer = setTimeout(() => {
        this.timer = null;
        if (this.sessionId) this.resume();
        else if (this.queue.length) this.connect();
      }, wait);
    };
  }
}
