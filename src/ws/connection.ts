/**
 * One WebSocket connection: its caller, its session subscriptions, and sending with a bounded
 * backlog. A socket whose unsent data passes MAX_BACKLOG is closed with 1013 (try again later)
 * and can reconnect and `session.resume` from its last seq — a slow reader never slows the agent
 * or the other sockets. Direct sends count the bytes queued while stalled; frames fanned out
 * through native topics are covered by the stream server's periodic backlog check. Replays are
 * read page by page and pause on backpressure, continuing on `drain`.
 *
 * Closing a socket that has a backlog: once Bun's `close()` is called the socket is out of our
 * hands (and `terminate()` does nothing), and a close frame queued behind data its reader does not
 * read keeps the connection and the backlog until the close handshake times out (~15 s). So such
 * a socket gets nothing more, and its close frame is sent once the backlog has drained; a reader
 * that has not drained it within CLOSE_GRACE_MS is terminated.
 */
import type { ServerWebSocket } from "bun";
import type { Principal } from "../auth/principal.ts";
import { adminTopic, type Hub, type NativeDelivery, sessionTopic, type Subscription } from "../events/hub.ts";
import { AppError } from "../lib/errors.ts";
import type { FrameOf } from "../schema/stream.ts";

export const MAX_BACKLOG = 4 * 1024 * 1024;
export const MAX_SUBSCRIPTIONS = 200;
/** Live frames held for one subscription while its replay is being sent. */
export const MAX_PENDING_DURING_REPLAY = 20_000;
export const CLOSE_AUTH = 4001;
/** The 4001 reason when a cookie socket's sign-in session ran out (a revoked one says "credential revoked"). */
export const SIGN_IN_EXPIRED = "authentication failed: the sign-in session expired";
/** One socket more than --max-sockets-per-caller: closed right after it opened. */
export const CLOSE_TOO_MANY_SOCKETS = 4029;
export const CLOSE_TOO_SLOW = 1013;
export const CLOSE_GOING_AWAY = 1001;
/** The socket's user changed role (what it may receive changed): reconnect, the credential still holds. */
export const CLOSE_RECONNECT = 1012;
/** How long a closed socket's backlog may take to drain before the connection is terminated. */
export const CLOSE_GRACE_MS = 5000;

export interface SocketData {
  id: number;
  principal: Principal | null;
  authError: "missing" | "invalid";
  ip: string;
  requestId: string;
  subs: Map<string, Subscription> | null;
  drainWaiters: (() => void)[] | null;
  /** Bytes queued since a send reported backpressure (-1: not stalled; a drain resets it). */
  stalledBytes: number;
  /** Unsent bytes at the previous periodic backlog check. */
  lastBuffered: number;
  closed: boolean;
  /** Counted against its caller's socket cap (from open until Bun's close handler). */
  counted: boolean;
  /** A close waiting for the backlog to drain (sent then), with the timer that terminates instead. */
  pendingClose: { code: number; reason: string; timer: Timer } | null;
  /** Messages of this socket waiting for their turn of the event loop (later ones wait behind them). */
  queued: number;
  /** Called once when the server decides to close the socket (the stream server stops counting it as open). */
  onClosing: (() => void) | null;
  /** Opened with a session cookie: when that sign-in session ends, as last read (null: opened with a token). */
  signedInUntil: number | null;
  /** The sign-in session being looked up again (it passed `signedInUntil`): messages wait for it. */
  authCheck: Promise<void> | null;
}

export type Socket = ServerWebSocket<SocketData>;

/**
 * Sends one frame; false when the socket is (now) closed. The backlog that counts is what was
 * queued while the socket was stalled: from a send that reported backpressure until the next
 * `drain`. A reader that keeps up may receive one frame larger than the limit; one that stops
 * reading is closed once MAX_BACKLOG more bytes pile up behind it.
 */
export function send(ws: Socket, json: string): boolean {
  const d = ws.data;
  if (d.closed) return false;
  if (d.stalledBytes >= 0) {
    d.stalledBytes += json.length;
    if (d.stalledBytes > MAX_BACKLOG) {
      close(ws, CLOSE_TOO_SLOW, "send backlog exceeded: reconnect and session.resume");
      return false;
    }
  }
  const r = ws.send(json);
  if (r === 0) {
    close(ws, CLOSE_TOO_SLOW, "send backlog exceeded: reconnect and session.resume");
    return false;
  }
  if (r === -1 && d.stalledBytes < 0) d.stalledBytes = 0;
  return true;
}

export function sendError(ws: Socket, err: AppError, requestId?: string) {
  const frame: FrameOf<"error"> = { type: "error", code: err.code, message: err.message };
  if (requestId !== undefined) frame.request_id = requestId;
  if (err.details) frame.details = err.details;
  send(ws, JSON.stringify(frame));
}

/**
 * Closes the socket with `code`: at once when nothing waits to be sent (or `now`), else once the
 * backlog has drained (`onDrain`, or the stream server's periodic check calling `finishClose`),
 * terminating the connection if that takes longer than CLOSE_GRACE_MS.
 */
export function close(ws: Socket, code: number, reason: string, now = false) {
  const d = ws.data;
  if (d.closed) return;
  d.closed = true;
  dropSubscriptions(ws);
  const onClosing = d.onClosing;
  d.onClosing = null;
  onClosing?.();
  if (!now && backlog(ws) > 0) {
    const timer = setTimeout(() => terminate(ws), CLOSE_GRACE_MS);
    timer.unref?.();
    d.pendingClose = { code, reason, timer };
    return;
  }
  closeNow(ws, code, reason);
}

function backlog(ws: Socket): number {
  try {
    return ws.getBufferedAmount();
  } catch {
    return 0;
  }
}

function closeNow(ws: Socket, code: number, reason: string) {
  try {
    ws.close(code, reason);
  } catch {
    // Already closing.
  }
}

/** Sends a pending close frame once the backlog has drained (or at once with `force`). */
export function finishClose(ws: Socket, force = false) {
  const p = ws.data.pendingClose;
  if (!p || (!force && backlog(ws) > 0)) return;
  clearTimeout(p.timer);
  ws.data.pendingClose = null;
  closeNow(ws, p.code, p.reason);
}

/** The reader did not take its backlog in time: drop the connection without a close handshake. */
function terminate(ws: Socket) {
  if (!ws.data.pendingClose) return;
  ws.data.pendingClose = null;
  try {
    ws.terminate();
  } catch {
    // Already gone.
  }
}

/** The connection is gone (Bun's close handler): no close of ours is pending any more. */
export function onClosed(ws: Socket) {
  const d = ws.data;
  d.closed = true;
  if (d.pendingClose) clearTimeout(d.pendingClose.timer);
  d.pendingClose = null;
  d.onClosing = null;
  dropSubscriptions(ws);
}

export function dropSubscriptions(ws: Socket) {
  const d = ws.data;
  if (d.subs) for (const s of d.subs.values()) s.close();
  d.subs = null;
  if (d.drainWaiters) for (const w of d.drainWaiters) w();
  d.drainWaiters = null;
}

function drained(ws: Socket): Promise<void> {
  return new Promise((resolve) => (ws.data.drainWaiters ??= []).push(resolve));
}

export function onDrain(ws: Socket) {
  ws.data.stalledBytes = -1;
  const waiters = ws.data.drainWaiters;
  ws.data.drainWaiters = null;
  if (waiters) for (const w of waiters) w();
  if (ws.data.pendingClose) finishClose(ws);
}

function addSubscription(ws: Socket, sessionId: string, sub: Subscription) {
  const subs = (ws.data.subs ??= new Map());
  subs.get(sessionId)?.close();
  if (!subs.has(sessionId) && subs.size >= MAX_SUBSCRIPTIONS) {
    sub.close();
    throw new AppError("VALIDATION_FAILED", `A socket can watch at most ${MAX_SUBSCRIPTIONS} sessions`, { field: "session_id" });
  }
  subs.set(sessionId, sub);
}

/** Once live, the socket gets the session's frames from Bun's native topics. */
function nativeDelivery(ws: Socket, sessionId: string, isAdmin: boolean): NativeDelivery {
  const topics = isAdmin ? [sessionTopic(sessionId), adminTopic(sessionId)] : [sessionTopic(sessionId)];
  return {
    join: () => {
      for (const t of topics) ws.subscribe(t);
    },
    leave: () => {
      if (ws.data.closed) return; // Bun drops a closed socket's topics itself.
      for (const t of topics) ws.unsubscribe(t);
    },
  };
}

/**
 * Live frames of the session from now on (no replay). Idempotent. Subscribes synchronously once
 * the session's counter is known (always on SQLite; on PostgreSQL after its first read here).
 */
export function watch(ws: Socket, hub: Hub, sessionId: string): void | Promise<void> {
  if (!hub.ready(sessionId)) return hub.load(sessionId).then(() => watch(ws, hub, sessionId));
  const p = ws.data.principal!;
  if (ws.data.closed) return hub.release(sessionId);
  if (ws.data.subs?.has(sessionId)) return;
  const isAdmin = p.user.role === "admin";
  const subscription = hub.live({ sessionId, userId: p.user.id, isAdmin, sink: (json) => send(ws, json), native: nativeDelivery(ws, sessionId, isAdmin) });
  addSubscription(ws, sessionId, subscription);
}

/**
 * session.replay_start, every stored frame after `after` in order (read from the log a page at a
 * time), session.replay_end, then live frames — no gap and no duplicate at the seam (see
 * Hub.attach).
 */
export async function replay(ws: Socket, hub: Hub, sessionId: string, after: number) {
  const p = ws.data.principal!;
  const isAdmin = p.user.role === "admin";
  const { subscription, replay: firstPage, cursor } = await hub.attach({
    sessionId,
    userId: p.user.id,
    isAdmin,
    sink: (json) => send(ws, json),
    native: nativeDelivery(ws, sessionId, isAdmin),
    replayAfter: after,
    maxPending: MAX_PENDING_DURING_REPLAY,
    onOverflow: () => close(ws, CLOSE_TOO_SLOW, "too many live frames during replay: reconnect and session.resume"),
  });
  if (ws.data.closed) return subscription.close();
  addSubscription(ws, sessionId, subscription);
  if (!send(ws, JSON.stringify({ type: "session.replay_start", session_id: sessionId, after } satisfies FrameOf<"session.replay_start">))) return;
  for (let rows = firstPage; rows.length > 0; rows = await cursor!.next()) {
    for (const row of rows) {
      if (ws.data.closed || subscription.closed) return;
      const r = ws.send(row.frame);
      if (r === 0) return close(ws, CLOSE_TOO_SLOW, "send failed during replay");
      if (r === -1) await drained(ws);
    }
    if (ws.data.closed || subscription.closed) return;
  }
  const lastSeq = cursor!.lastSeq;
  if (!send(ws, JSON.stringify({ type: "session.replay_end", session_id: sessionId, last_seq: lastSeq } satisfies FrameOf<"session.replay_end">))) return;
  subscription.goLive(lastSeq);
}
