/**
 * Fan-out of session frames. `publish` appends a frame to the event log (which assigns its seq)
 * and hands the same serialized string to every subscriber of the session; before it does, the
 * log reserves that seq (EventLog.reserve), since the frame may not be stored yet. `task:system_prompt`
 * (ADMIN_ONLY_TYPES) is numbered and stored like every frame but goes only to admin-role
 * subscribers, live and in replays (others see a gap in `seq` there).
 *
 * Two kinds of live delivery: a JS sink per subscription, or — for WebSockets — a native topic
 * (Bun's `publish`, which writes one frame to every subscriber in one call and batches the
 * writes at the end of the event loop's iteration). A session watched live by one socket is sent
 * to directly; once two or more sockets watch it live, they all join its topics (`Hub.wentLive`).
 * A socket joins a topic only once it is live, so native delivery never overtakes a replay.
 *
 * Replay without a gap or a duplicate at the seam: `attach` registers the subscription first (in
 * buffering mode, so live frames queue up) and, in the same synchronous step, takes the replay's
 * bound (the highest seq assigned so far), so every frame is either at or below the bound (in the
 * replay) or in the buffer. The replay is then read page by page (`Replay.next`, at most
 * `pageSize` rows at a time, each read flushing the log first) up to that bound, however many
 * frames are published meanwhile. `goLive` then drains the buffer, skipping anything at or below
 * the last replayed seq, and (synchronously, so nothing is published in between) hands delivery
 * over to the native topics when the session is on them.
 *
 * On PostgreSQL (src/events/pg-log.ts) frames leave only once stored, numbered by the database:
 * `publish` queues them in the log, which hands stored frames back (`deliverStored`) — this
 * process's own and, for the sessions watched here, other replicas' — each session's in seq
 * order. A session is watched from its first subscription in this process (`EventStore.load`)
 * until its last one leaves (`unwatch`); `attach` reads the replay's bound from the database
 * after registering the subscription, which keeps the seam exact across replicas (every frame
 * committed before that read is at or below the bound, every later one reaches the subscription
 * live). Nothing of this runs on SQLite, where frames are numbered and leave at once.
 */
import type { FrameInput } from "../schema/stream.ts";
import { ADMIN_ONLY_TYPES, type EventStore, type ReadBound, type StoredFrame, type StoredLive } from "./log.ts";

/** Rows read from the log at a time for a replay. */
export const REPLAY_PAGE = 1000;

/** Topic names for native fan-out: every viewer of a session, and its admin viewers. */
export const sessionTopic = (sessionId: string) => `s:${sessionId}`;
export const adminTopic = (sessionId: string) => `a:${sessionId}`;

export interface FrameSink {
  /** Sends one serialized frame. Returns false when the subscriber must be dropped. */
  (json: string, seq: number, type: string): boolean | void;
}

/** Joins/leaves the native topics of a session (a WebSocket's subscribe/unsubscribe). */
export interface NativeDelivery {
  join(): void;
  leave(): void;
}

export class Subscription {
  private buffering = true;
  private native = false;
  private pending: { seq: number; type: string; json: string }[] = [];
  /** The highest seq this subscriber has been sent (by its replay, or live): nothing at or below it is sent again. */
  sentUpTo = 0;
  closed = false;

  constructor(
    readonly sessionId: string,
    readonly userId: string,
    readonly isAdmin: boolean,
    private sink: FrameSink,
    private hub: Hub,
    /** Most frames held while a replay is being sent (then the subscriber is dropped). */
    private maxPending = 10_000,
    private onOverflow: () => void = () => {},
    private delivery: NativeDelivery | null = null,
  ) {}

  /** Called by the hub for each live frame. */
  deliver(seq: number, type: string, json: string) {
    if (this.closed || this.native) return;
    if (ADMIN_ONLY_TYPES.has(type) && !this.isAdmin) return;
    if (this.buffering) {
      this.pending.push({ seq, type, json });
      if (this.pending.length > this.maxPending) {
        this.close();
        this.onOverflow();
      }
      return;
    }
    // Already sent (PostgreSQL: a frame its replay read can still come from the session's tail).
    if (seq <= this.sentUpTo) return;
    this.sentUpTo = seq;
    if (this.sink(json, seq, type) === false) this.close();
  }

  /** Ends buffering: sends queued frames newer than `lastSentSeq`, then live ones as they come. */
  goLive(lastSentSeq: number) {
    const queued = this.pending;
    this.pending = [];
    this.buffering = false;
    this.sentUpTo = Math.max(this.sentUpTo, lastSentSeq);
    for (const p of queued) {
      if (this.closed) return;
      if (p.seq <= this.sentUpTo) continue;
      this.sentUpTo = p.seq;
      if (this.sink(p.json, p.seq, p.type) === false) this.close();
    }
    if (!this.closed) this.hub.wentLive(this);
  }

  /** Whether it may take its live frames from the session's native topics (a live socket). */
  get canJoin(): boolean {
    return this.delivery !== null && !this.buffering && !this.closed;
  }

  /** Joined the session's native topics. */
  get onTopics(): boolean {
    return this.native;
  }

  /** From now on live frames reach it through the session's native topics (the hub decided). */
  joinTopics() {
    if (this.native || !this.delivery) return;
    this.native = true;
    this.delivery.join();
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.pending = [];
    if (this.native) this.delivery?.leave();
    this.hub.unsubscribe(this);
  }
}

export class Hub {
  private subs = new Map<string, Set<Subscription>>();
  /**
   * Sessions whose live frames go out through native topics. Bun's `publish` writes a topic's
   * frames at the end of the event loop's iteration, for all its subscribers at once: the right
   * trade for a session watched by several sockets, but for the usual one it holds every frame
   * back until the whole iteration is done — in a burst of `session.start`s read together, every
   * `session.ready` left with the last one. So a session's frames are sent directly (each socket's
   * own `send`, at once) until a second socket watches it live; then all its live sockets join the
   * topics, and the session stays on them until nobody watches it. Never the other way round
   * while anyone watches: a direct send after a topic's frames were queued in the same iteration
   * would overtake them.
   */
  private topicSessions = new Set<string>();
  /**
   * The highest seq handed to each watched session's subscribers. A socket joins the topics only
   * once the session's frames are past what its replay sent it: on PostgreSQL a frame the replay
   * read can still come from the session's tail afterwards (another replica's frame, read on its
   * NOTIFY while the replay read it too), and a topic cannot skip it for one socket. Until then it
   * is sent to directly, and skips what it has.
   */
  private delivered = new Map<string, number>();
  /** Live sockets of sessions on topics that wait for the session's frames to pass their replay. */
  private joining = new Map<string, Set<Subscription>>();
  /** Bun's server.publish, once the server runs (set by the app: `useNativePublish`). */
  nativePublish: ((topic: string, json: string) => void) | null = null;

  constructor(private log: EventStore) {
    if (log.deliversWhenStored) log.onStored = (frames) => this.deliverStored(frames);
  }

  /** Hands native topic fan-out to the running server (src/app.ts wires it at start). */
  useNativePublish(publish: ((topic: string, json: string) => void) | null) {
    this.nativePublish = publish;
  }

  publish(sessionId: string, frame: FrameInput): void {
    const r = this.log.append(sessionId, frame);
    // PostgreSQL: numbered and handed back once stored (deliverStored).
    if (!r || !this.subs.has(sessionId)) return;
    // The frame leaves before its batch is written: its seq must survive a crash unused.
    this.log.reserve(sessionId, r.seq);
    this.deliver(sessionId, r.seq, frame.type, r.json);
  }

  private deliver(sessionId: string, seq: number, type: string, json: string) {
    const set = this.subs.get(sessionId);
    if (!set) return;
    if (this.topicSessions.has(sessionId)) this.nativePublish?.(ADMIN_ONLY_TYPES.has(type) ? adminTopic(sessionId) : sessionTopic(sessionId), json);
    for (const s of set) s.deliver(seq, type, json);
    this.delivered.set(sessionId, seq);
    const waiting = this.joining.get(sessionId);
    if (waiting) this.joinCaughtUp(sessionId, waiting, seq);
  }

  /** Sockets waiting to join whose replay the session's frames have now passed join the topics. */
  private joinCaughtUp(sessionId: string, waiting: Set<Subscription>, upTo: number) {
    for (const s of waiting) {
      if (s.closed) waiting.delete(s);
      else if (s.sentUpTo <= upTo) {
        waiting.delete(s);
        s.joinTopics();
      }
    }
    if (waiting.size === 0) this.joining.delete(sessionId);
  }

  /** A subscription went live: it joins the session's topics once two or more live sockets watch it. */
  wentLive(sub: Subscription) {
    if (!this.nativePublish) return;
    const id = sub.sessionId;
    if (!this.topicSessions.has(id)) {
      const set = this.subs.get(id);
      if (!set) return;
      let live = 0;
      for (const s of set) if (s.canJoin) live++;
      if (live < 2) return;
      this.topicSessions.add(id);
      for (const s of set) if (s !== sub && s.canJoin) this.join(s);
    }
    this.join(sub);
  }

  /** Joins the session's topics now, or once its frames are past what the subscriber was sent. */
  private join(sub: Subscription) {
    if (sub.onTopics) return;
    if (sub.sentUpTo <= (this.delivered.get(sub.sessionId) ?? 0)) return sub.joinTopics();
    let waiting = this.joining.get(sub.sessionId);
    if (!waiting) this.joining.set(sub.sessionId, (waiting = new Set()));
    waiting.add(sub);
  }

  /** Whether the session's live frames go out through native topics (tests). */
  onTopics(sessionId: string): boolean {
    return this.topicSessions.has(sessionId);
  }

  /** Frames the log stored (PostgreSQL), in order: out to their sessions' subscribers. */
  private deliverStored(frames: StoredLive[]) {
    for (const f of frames) this.deliver(f.session_id, f.seq, f.type, f.json);
  }

  /** Whether the session is watched here, so `live` can subscribe at once (always on SQLite). */
  ready(sessionId: string): boolean {
    return this.log.ready(sessionId);
  }

  load(sessionId: string): Promise<void> {
    return this.log.load(sessionId);
  }

  /** A live subscription from now on, registered synchronously (the session must be `ready`). */
  live(opts: { sessionId: string; userId: string; isAdmin: boolean; sink: FrameSink; native?: NativeDelivery }): Subscription {
    if (!this.log.ready(opts.sessionId)) throw new Error(`hub: session ${opts.sessionId} watched before load()`);
    const sub = new Subscription(opts.sessionId, opts.userId, opts.isAdmin, opts.sink, this, undefined, undefined, opts.native ?? null);
    this.register(sub);
    sub.goLive(0);
    return sub;
  }

  private register(sub: Subscription) {
    let set = this.subs.get(sub.sessionId);
    if (!set) this.subs.set(sub.sessionId, (set = new Set()));
    set.add(sub);
  }

  /**
   * Subscribes to a session. With `replayAfter` (a seq, 0 for everything) it returns the first
   * page of the stored frames after it (`replay`, filtered for the subscriber's role, at most
   * `pageSize` rows), the highest seq read so far (`lastSeq`), and `cursor` for the following
   * pages; the subscription stays buffering until `goLive(cursor.lastSeq)` once the cursor is
   * done. Without it the subscription is live at once. With `native`, live delivery moves to the
   * session's topics when it goes live.
   */
  async attach(opts: {
    sessionId: string;
    userId: string;
    isAdmin: boolean;
    sink: FrameSink;
    replayAfter?: number;
    pageSize?: number;
    maxPending?: number;
    onOverflow?: () => void;
    native?: NativeDelivery;
  }): Promise<{ subscription: Subscription; replay: StoredFrame[]; lastSeq: number; cursor: Replay | null }> {
    // Watched first (PostgreSQL); from here on nothing is awaited until the subscription is registered.
    if (!this.log.ready(opts.sessionId)) await this.log.load(opts.sessionId);
    const sub = new Subscription(opts.sessionId, opts.userId, opts.isAdmin, opts.sink, this, opts.maxPending, opts.onOverflow, opts.native ?? null);
    this.register(sub);
    try {
      // Unwatched in between (its last other subscriber left while this one waited): watched again.
      if (!this.log.ready(opts.sessionId)) await this.log.load(opts.sessionId);
      // The seam: the bound is taken after the registration — in the same synchronous step on
      // SQLite; on PostgreSQL read from the database (frames committed after that read are above it).
      const b = this.log.bound(opts.sessionId);
      const bound = b instanceof Promise ? await b : b;
      if (opts.replayAfter === undefined) {
        sub.goLive(0);
        return { subscription: sub, replay: [], lastSeq: bound.seq, cursor: null };
      }
      const cursor = new Replay(this.log, opts.sessionId, opts.replayAfter, bound, opts.isAdmin, opts.pageSize ?? REPLAY_PAGE);
      const replay = await cursor.next();
      return { subscription: sub, replay, lastSeq: cursor.lastSeq, cursor };
    } catch (e) {
      // The caller never gets the subscription: it must not stay registered, buffering.
      sub.close();
      throw e;
    }
  }

  /** A session loaded for a subscriber that never came (its socket closed meanwhile): unwatched unless someone else watches it. */
  release(sessionId: string) {
    if (!this.subs.has(sessionId)) this.log.unwatch(sessionId);
  }

  unsubscribe(sub: Subscription) {
    const set = this.subs.get(sub.sessionId);
    if (!set) return;
    set.delete(sub);
    if (set.size > 0) return;
    this.subs.delete(sub.sessionId);
    this.topicSessions.delete(sub.sessionId);
    this.delivered.delete(sub.sessionId);
    this.joining.delete(sub.sessionId);
    this.log.unwatch(sub.sessionId);
  }

  /** Drops every subscription of a session (the session was deleted). */
  closeSession(sessionId: string) {
    for (const s of [...(this.subs.get(sessionId) ?? [])]) s.close();
  }

  subscriberCount(sessionId?: string): number {
    if (sessionId) return this.subs.get(sessionId)?.size ?? 0;
    let n = 0;
    for (const set of this.subs.values()) n += set.size;
    return n;
  }
}

/** A replay read page by page, up to the bound taken when its subscription was registered. */
export class Replay {
  /** Highest seq read so far (`after`, or the bound when `after` is beyond it, until a frame is read). */
  lastSeq: number;
  done = false;
  private from: number;

  constructor(
    private log: EventStore,
    readonly sessionId: string,
    after: number,
    private bound: ReadBound,
    private withAdmin: boolean,
    private pageSize: number,
  ) {
    // An `after` beyond the stored frames (a stale client, a restored backup) replays nothing and
    // goes live from the bound: frames stored later must not be taken for already sent.
    this.lastSeq = Math.min(after, bound.seq);
    this.from = this.lastSeq;
  }

  /** The next page ([] once done). */
  async next(): Promise<StoredFrame[]> {
    if (this.done) return [];
    const { rows, more } = await this.log.readPage(this.sessionId, this.from, this.bound, this.pageSize, this.withAdmin);
    if (rows.length) this.lastSeq = rows[rows.length - 1]!.seq;
    if (more) this.from = this.lastSeq;
    else this.done = true;
    return rows;
  }
}
