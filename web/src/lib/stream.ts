/**
 * The one WebSocket client of the dashboard: it owns the socket to /v1/stream (authenticated by
 * the session cookie), reconnects with backoff after any drop, and resumes the open session after
 * the last seq it delivered — so a listener sees every frame once, in order, across drops and
 * reloads (the caller passes the seq it already has) — or after an earlier seq its `onReconnect`
 * returns (the listener dropped what it held of an unfinished turn: the replay rebuilds it).
 * Frames are typed by the server's schema.
 *
 * Every message carries a request_id, so the error frame refusing it finds it again: a message
 * refused by the rate limit (RATE_LIMITED) is sent again after `details.retry_after`; another
 * refusal goes to the sender's `onRefused` (else to onFrame). A close with 4001 (signed out)
 * refuses the messages still waiting and signs the page out (lib/status.ts).
 */
import type { ClientMessage, ServerFrame } from "../../../src/schema/stream.ts";
import { signedOut, slowedDown } from "./status.ts";

export type { ServerFrame };
/** `reconnecting`: the connection was lost (or could not be made) and is being tried again. */
export type StreamState = "connecting" | "open" | "closed" | "reconnecting";
export type ErrorFrame = Extract<ServerFrame, { type: "error" }>;
export type Refused = (f: ErrorFrame) => void;

type Listener = (f: ServerFrame) => void;
/** Sent messages kept for their possible refusal (an accepted message gets no answer of its own). */
const KEEP_SENT = 100;

export class StreamClient {
  private ws: WebSocket | null = null;
  private sessionId: string | null = null;
  private lastSeq = 0;
  private queue: ClientMessage[] = [];
  private nextId = 1;
  private sent = new Map<string, { msg: ClientMessage; onRefused?: Refused }>();
  /** The request_id of the latest session.resume (an older one refused is not retried). */
  private resumeId = "";
  private onResumeRefused?: Refused;
  private retry = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closedByUs = false;
  /** After a session.resume: live frames that overtake the replay are dropped (the replay brings them again). */
  private awaitingReplay = false;
  state: StreamState = "closed";
  onFrame: Listener = () => {};
  onState: (s: StreamState) => void = () => {};
  /** Before resuming the followed session after a reconnect: an earlier seq to resume after, if any. */
  onReconnect: () => number | undefined = () => undefined;

  constructor(private url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/stream`) {}

  /**
   * Follows a session from `after` (its replay, then live frames); reconnects keep following it.
   * `onRefused`: the resume was refused (NOT_FOUND: no such session of ours).
   */
  follow(sessionId: string, after = 0, onRefused?: Refused) {
    this.sessionId = sessionId;
    this.lastSeq = after;
    this.onResumeRefused = onRefused;
    this.resume();
  }

  private resume() {
    if (!this.sessionId) return;
    this.awaitingReplay = true;
    this.resumeId = this.send({ type: "session.resume", session_id: this.sessionId, after: this.lastSeq }, this.onResumeRefused);
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

  /** Sends (or queues until connected) a message; returns its request_id. */
  send(message: ClientMessage, onRefused?: Refused): string {
    const msg = { ...message, request_id: `r${this.nextId++}` };
    this.sent.set(msg.request_id, { msg, onRefused });
    if (this.sent.size > KEEP_SENT) this.sent.delete(this.sent.keys().next().value!);
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
    else {
      // A resume replaces an older one (the seq moves on); other messages wait in order.
      if (msg.type === "session.resume") this.queue = this.queue.filter((m) => m.type !== "session.resume");
      this.queue.push(msg);
      this.connect();
    }
    return msg.request_id;
  }

  /** An error frame answering one of our messages: retried when rate-limited, else its sender's. Returns whether it was handled. */
  private refused(f: ErrorFrame): boolean {
    const sent = f.request_id ? this.sent.get(f.request_id) : undefined;
    if (!sent) return false;
    this.sent.delete(f.request_id!);
    if (f.code === "RATE_LIMITED") {
      const wait = Math.max(1, Number(f.details?.retry_after) || 1);
      slowedDown(wait);
      setTimeout(() => {
        if (sent.msg.type !== "session.resume") this.send(sent.msg, sent.onRefused);
        else if (f.request_id === this.resumeId && sent.msg.session_id === this.sessionId) this.resume();
      }, wait * 1000);
      return true;
    }
    if (!sent.onRefused) return false;
    sent.onRefused(f);
    return true;
  }

  private setState(s: StreamState) {
    this.state = s;
    this.onState(s);
  }

  private connect() {
    if (this.ws || this.timer) return;
    this.closedByUs = false;
    this.setState(this.retry > 0 ? "reconnecting" : "connecting");
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
      if (f.type === "error") {
        const handled = this.refused(f);
        if (f.code === "UNAUTHORIZED") signedOut(); // (after its sender took its message back)
        if (handled) return;
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
      if (this.closedByUs || ev.code === 4001) this.setState("closed");
      if (this.closedByUs) return;
      if (ev.code === 4001) {
        // Signed out: what waits to be sent never will be; its senders get it back.
        const waiting = this.queue;
        this.queue = [];
        for (const m of waiting) this.sent.get(m.request_id!)?.onRefused?.({ type: "error", code: "UNAUTHORIZED", message: "You are signed out: sign in again to send this." });
        signedOut();
        return;
      }
      // Back off 0.5 s, 1 s, 2 s … up to 10 s, then resume where we were.
      const wait = Math.min(10_000, 500 * 2 ** this.retry++);
      this.setState("reconnecting");
      this.timer = setTimeout(() => {
        this.timer = null;
        if (this.sessionId) {
          const after = this.onReconnect();
          if (after !== undefined && after < this.lastSeq) this.lastSeq = after;
          this.resume();
        } else if (this.queue.length) this.connect();
        else this.setState("closed"); // nothing to follow or send: no need to be connected
      }, wait);
    };
  }
}
