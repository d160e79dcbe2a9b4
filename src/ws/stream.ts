/**
 * The /v1/stream WebSocket: authentication at the upgrade (subprotocol `Bearer.<token>`,
 * `?token=`, `Authorization` header, or the session cookie), then frames in, service calls out.
 * It runs on Bun's native WebSocket server (not Elysia's wrapper): per-socket state lives on
 * `ws.data`, and every frame of a session is serialized once by the hub.
 *
 * Limits per caller: the upgrade and every client frame take a token from the caller's rate-limit
 * bucket (the one REST uses, `u:<user id>`; an empty bucket answers a RATE_LIMITED error frame and
 * the socket stays open), and a caller holds at most `maxSocketsPerCaller` sockets (one more is
 * closed right after it opens, with 4029).
 */
import type { Server, WebSocketHandler } from "bun";
import type { Authenticated } from "../auth/principal.ts";
import type { Authenticator } from "../auth/authenticate.ts";
import type { LoginSessions } from "../auth/sessions.ts";
import type { Orchestrator } from "../agents/orchestrator.ts";
import type { SessionLifecycle } from "../agents/session-lifecycle.ts";
import type { AgentSessions } from "../agents/sessions.ts";
import type { Hub } from "../events/hub.ts";
import { isCrossSite } from "../http/pipeline.ts";
import type { RequestContext } from "../http/context.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { errorResponse } from "../http/errors.ts";
import type { RateLimiter, RateLimitResult } from "../lib/ratelimit.ts";
import { MAX_JSON_BODY } from "../http/parse.ts";
import type { Logger } from "../log.ts";
import {
  CLOSE_AUTH,
  CLOSE_RECONNECT,
  CLOSE_TOO_MANY_SOCKETS,
  CLOSE_TOO_SLOW,
  close,
  finishClose,
  MAX_BACKLOG,
  onClosed,
  onDrain,
  replay,
  SIGN_IN_EXPIRED,
  sendError,
  type Socket,
  type SocketData,
  watch,
} from "./connection.ts";
import { type ClientMessage, parseFrame, requestIdOf, validateClientMessage } from "./messages.ts";
import { nextTurn } from "../lib/turns.ts";

/** The /v1/stream WebSocket server, as the app's composition root sees it. */
export interface StreamServer {
  handlers: WebSocketHandler<SocketData>;
  upgrade(req: Request, server: Server<unknown>, ctx: RequestContext): Promise<Response | undefined>;
  closeAll(code: number, reason: string): void;
  /** Closes with 4001 every socket authenticated by this credential or owned by this user. */
  revoke(key: { tokenId?: string; loginSessionId?: string; userId?: string }, reason?: string): void;
  /**
   * Closes the user's sockets with 1012 (reconnect): their role changed, so what they may receive
   * (`task:system_prompt` is for admins) is decided again when they reconnect and resume.
   */
  reconnect(userId: string, reason: string): void;
  /** Open sockets (not counting those being closed). */
  readonly size: number;
  /** Sockets the server closed whose close frame still waits for their backlog to drain. */
  readonly closing: number;
}

export interface StreamDeps {
  log: Logger;
  publicUrl: string;
  authenticator: Authenticator;
  limiter: RateLimiter;
  hub: Hub;
  orchestrator: Orchestrator;
  agentSessions: AgentSessions;
  sessionLifecycle: SessionLifecycle;
  /** Sockets one user may hold open at once (--max-sockets-per-caller). */
  maxSocketsPerCaller: number;
  /** This server's replica id: the 101 carries `X-Runcell-Replica` like every other answer. */
  replica?: string;
  /** Cookie sessions, looked up again when one passes the expiry its socket knew of. */
  loginSessions: Pick<LoginSessions, "endsAt">;
  now: () => number;
}

const bearerProtocol = (req: Request) =>
  (req.headers.get("sec-websocket-protocol") ?? "")
    .split(",")
    .map((p) => p.trim())
    .find((p) => p.startsWith("Bearer."));

/** A request_id found in a frame's text without parsing it (a refused frame still names its request). */
const requestIdIn = (text: string) => /"request_id"\s*:\s*"([^"\\]{0,200})"/.exec(text)?.[1];

/** Client messages that start work (a session, a task): each is handled in a turn of its own. */
const STARTS_WORK: ReadonlySet<string> = new Set(["task.submit", "session.turn", "session.start"]);

/**
 * Waits for a turn of the event loop (src/lib/turns.ts), counted on the socket: while one of its
 * messages waits, the ones after it wait too, so a socket's messages are handled — and answered —
 * in the order they came.
 */
async function turnFor(ws: Socket): Promise<void> {
  ws.data.queued++;
  try {
    await nextTurn();
  } finally {
    ws.data.queued--;
  }
}

function tryParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export function createStreamServer(d: StreamDeps): StreamServer {
  const publicOrigin = new URL(d.publicUrl).origin;
  /** Open sockets. */
  const sockets = new Set<Socket>();
  /** Sockets closed by the server, their close frame waiting for the backlog to drain. */
  const closing = new Set<Socket>();
  /** `tok:<id>`, `login:<id>`, `usr:<id>` → open sockets, for revocation. */
  const index = new Map<string, Set<Socket>>();
  /** user id → sockets the server holds for that user (open or closing). */
  const perCaller = new Map<string, number>();
  let nextId = 1;

  /**
   * Frames fanned out by native topics bypass `send`, so a reader that stopped reading is found
   * here: every BACKLOG_CHECK_MS, a socket over MAX_BACKLOG unsent bytes at two checks in a row,
   * with no shrinking in between (no progress), is closed with 1013; past HARD_BACKLOG it is closed
   * at once. One large frame to a reader that keeps up is over the limit at one check only.
   * (Bun's own limit, above both, is the last resort.) The same check sends the close frame of a
   * closing socket whose backlog has drained.
   */
  const BACKLOG_CHECK_MS = 200;
  const HARD_BACKLOG = 8 * MAX_BACKLOG;
  let backlogTimer: Timer | null = null;
  const checkBacklogs = () => {
    for (const ws of sockets) {
      const buffered = ws.getBufferedAmount();
      const previous = ws.data.lastBuffered;
      ws.data.lastBuffered = buffered;
      if (buffered > HARD_BACKLOG || (buffered > MAX_BACKLOG && previous > MAX_BACKLOG && buffered >= previous)) {
        close(ws, CLOSE_TOO_SLOW, "send backlog exceeded: reconnect and session.resume");
      }
    }
    for (const ws of closing) finishClose(ws);
    if (sockets.size === 0 && closing.size === 0 && backlogTimer) {
      clearInterval(backlogTimer);
      backlogTimer = null;
    }
  };

  const keysOf = (data: SocketData) => {
    const p = data.principal!;
    return [`usr:${p.user.id}`, p.tokenId ? `tok:${p.tokenId}` : `login:${p.loginSession?.id}`];
  };

  /** No longer open: out of the open set and the revocation index (closing, or gone). */
  const detach = (ws: Socket, stillHeld: boolean) => {
    if (!sockets.delete(ws)) return;
    for (const k of keysOf(ws.data)) {
      const set = index.get(k);
      set?.delete(ws);
      if (set?.size === 0) index.delete(k);
    }
    if (stillHeld) closing.add(ws);
  };

  /**
   * A token that would cost a bcrypt compare is paid for from the client address's bucket first
   * (`charged`), like on REST: an empty bucket refuses it with RATE_LIMITED, uncompared.
   */
  async function authenticate(
    req: Request,
    protocol: string | undefined,
    ctx: RequestContext,
  ): Promise<{ auth: Authenticated; viaCookie: boolean; charged: RateLimitResult | null }> {
    const creds = d.authenticator.credentials(req);
    const query = new URL(req.url, "http://localhost").searchParams.get("token"); // (a URL may be the path alone: no Host header)
    const bearer = protocol ? protocol.slice("Bearer.".length) : (query ?? creds.bearer);
    if (bearer !== null && bearer !== undefined) {
      let charged: RateLimitResult | null = null;
      const beforeCompare = () => {
        const r = (charged = d.limiter.take(ctx.addressBucket));
        if (!r.ok) throw Errors.rateLimited(r.retryAfterSec);
      };
      const auth = await d.authenticator.resolve({ bearer, cookie: null }, { beforeCompare });
      return { auth, viaCookie: false, charged };
    }
    return { auth: await d.authenticator.resolve({ bearer: null, cookie: creds.cookie }), viaCookie: creds.cookie !== null, charged: null };
  }

  /**
   * A cookie socket's sign-in session passed the expiry read at the upgrade (or at the last look):
   * read again — a session used since has moved its idle expiry on; one that ended closes the socket
   * with 4001 (the row deleted, as at sign-out), whether or not a request or the purge found it first.
   */
  async function checkSignIn(ws: Socket): Promise<void> {
    try {
      const until = await d.loginSessions.endsAt(ws.data.principal!.loginSession!.id);
      if (until === null) close(ws, CLOSE_AUTH, SIGN_IN_EXPIRED);
      else ws.data.signedInUntil = until;
    } catch (err) {
      // Not known now (the database failed): the message goes on, and the next one asks again.
      d.log.warn("sign-in session of a socket not checked", { socket: ws.data.id, err });
    } finally {
      ws.data.authCheck = null;
    }
  }

  async function dispatch(ws: Socket, msg: ClientMessage) {
    const user = ws.data.principal!.user;
    switch (msg.type) {
      case "task.submit":
      case "session.turn": {
        if (msg.session_id) {
          await d.agentSessions.get(user.id, msg.session_id);
          await watch(ws, d.hub, msg.session_id);
        }
        await d.orchestrator.submit(user.id, msg, { onSession: (sid) => watch(ws, d.hub, sid) });
        return;
      }
      case "session.start":
        await d.sessionLifecycle.start(user.id, msg.profile_id, { onSession: (sid) => watch(ws, d.hub, sid) });
        return;
      case "session.resume":
        await d.agentSessions.get(user.id, msg.session_id);
        await replay(ws, d.hub, msg.session_id, msg.after ?? 0);
        return;
      case "task.cancel":
        await d.orchestrator.cancel(user.id, msg.task_id);
        return;
      case "task.answer":
        await d.orchestrator.answer(user.id, msg.task_id, msg.answer);
        return;
    }
  }

  const handlers: WebSocketHandler<SocketData> = {
    maxPayloadLength: 16 * 1024 * 1024,
    // Our own limit (MAX_BACKLOG) decides; Bun's only has to be above it plus one large frame.
    backpressureLimit: 64 * 1024 * 1024,
    closeOnBackpressureLimit: true,
    idleTimeout: 120,
    sendPings: true,
    perMessageDeflate: false,
    open(ws) {
      if (!ws.data.principal) {
        ws.data.closed = true;
        ws.close(CLOSE_AUTH, ws.data.authError === "invalid" ? "authentication failed: invalid credential" : "authentication failed: no credential");
        return;
      }
      const userId = ws.data.principal.user.id;
      const held = perCaller.get(userId) ?? 0;
      if (held >= d.maxSocketsPerCaller) {
        ws.data.closed = true;
        ws.close(CLOSE_TOO_MANY_SOCKETS, `too many open sockets: at most ${d.maxSocketsPerCaller} per caller; close one first`);
        d.log.info("stream refused: too many sockets", { request_id: ws.data.requestId, user_id: userId, open: held, max: d.maxSocketsPerCaller });
        return;
      }
      perCaller.set(userId, held + 1);
      ws.data.counted = true;
      ws.data.onClosing = () => detach(ws, true);
      sockets.add(ws);
      backlogTimer ??= setInterval(checkBacklogs, BACKLOG_CHECK_MS);
      for (const k of keysOf(ws.data)) {
        let set = index.get(k);
        if (!set) index.set(k, (set = new Set()));
        set.add(ws);
      }
    },
    async message(ws, raw) {
      if (ws.data.closed || !ws.data.principal) return;
      // Past the sign-in session's expiry: this message, and those after it, wait for the look-up
      // (counted as waiting, so they keep their order).
      const until = ws.data.signedInUntil;
      if (ws.data.authCheck || (until !== null && d.now() >= until)) {
        ws.data.queued++;
        try {
          await (ws.data.authCheck ??= checkSignIn(ws));
        } finally {
          ws.data.queued--;
        }
        if (ws.data.closed) return;
      }
      // Behind a message of this socket that waits for its turn: handled (and answered) after it,
      // in a turn of its own.
      const waited = ws.data.queued > 0;
      if (waited) {
        await turnFor(ws);
        if (ws.data.closed) return;
      }
      const size = typeof raw === "string" ? Buffer.byteLength(raw) : raw.byteLength;
      let requestId: string | undefined;
      try {
        const text = typeof raw === "string" ? raw : Buffer.from(raw).toString("utf8");
        // Every frame takes from the caller's bucket, like a REST request.
        const rl = d.limiter.take(`u:${ws.data.principal.user.id}`);
        if (!rl.ok) {
          requestId = size > MAX_JSON_BODY ? requestIdIn(text) : requestIdOf(tryParse(text)) ?? requestIdIn(text);
          throw Errors.rateLimited(rl.retryAfterSec, `Too many messages: slow down and retry in ${rl.retryAfterSec} s`);
        }
        if (size > MAX_JSON_BODY) {
          // Not parsed; its request_id is still echoed so the client can match the refusal.
          requestId = requestIdIn(text);
          throw new AppError("VALIDATION_FAILED", `Frame is larger than ${MAX_JSON_BODY} bytes`, { field: "frame", limit_bytes: MAX_JSON_BODY });
        }
        let value: unknown;
        try {
          value = parseFrame(text);
        } catch (e) {
          // Bad JSON still names its request when its text does.
          requestId = requestIdIn(text);
          throw e;
        }
        requestId = requestIdOf(value);
        const msg = validateClientMessage(value);
        // Starting work (a session, a task) runs in a turn of its own: a burst of them read
        // together does not hold back the frames of sessions already streaming (src/lib/turns.ts).
        if (!waited && STARTS_WORK.has(msg.type)) {
          await turnFor(ws);
          if (ws.data.closed) return;
        }
        await dispatch(ws, msg);
      } catch (e) {
        if (e instanceof AppError) sendError(ws, e, requestId);
        else {
          d.log.error("stream message failed", { socket: ws.data.id, err: e });
          sendError(ws, Errors.internal(ws.data.requestId), requestId);
        }
      }
    },
    drain(ws) {
      onDrain(ws);
    },
    close(ws) {
      onClosed(ws);
      if (!ws.data.counted) return;
      ws.data.counted = false;
      detach(ws, false);
      closing.delete(ws);
      const userId = ws.data.principal!.user.id;
      const held = (perCaller.get(userId) ?? 1) - 1;
      if (held > 0) perCaller.set(userId, held);
      else perCaller.delete(userId);
    },
  };

  return {
    handlers,
    get size() {
      return sockets.size;
    },
    get closing() {
      return closing.size;
    },
    async upgrade(req, server, ctx) {
      const protocol = bearerProtocol(req);
      let authenticated: Awaited<ReturnType<typeof authenticate>>;
      try {
        authenticated = await authenticate(req, protocol, ctx);
      } catch (e) {
        if (e instanceof AppError) return errorResponse(e);
        throw e;
      }
      const { auth, viaCookie, charged } = authenticated;
      ctx.principal = auth.principal;
      if (req.headers.get("upgrade")?.toLowerCase() !== "websocket") {
        // Not a WebSocket handshake: an HTTP answer, credential first (a handshake's refusal is close 4001).
        if (!auth.principal) return errorResponse(Errors.unauthorized());
        return errorResponse(new AppError("VALIDATION_FAILED", "This endpoint speaks WebSocket only: send an Upgrade request", { field: "upgrade" }), { upgrade: "websocket" });
      }
      if (viaCookie && isCrossSite(req, publicOrigin)) {
        return errorResponse(Errors.forbidden("Cross-site WebSocket refused: the Origin is not this server's"));
      }
      // An anonymous caller whose address already paid for a compare is not charged twice.
      const rl = !auth.principal && charged ? charged : d.limiter.take(auth.principal ? `u:${auth.principal.user.id}` : ctx.addressBucket);
      ctx.rl = rl;
      if (!rl.ok) return errorResponse(Errors.rateLimited(rl.retryAfterSec));
      const data: SocketData = {
        id: nextId++,
        principal: auth.principal,
        authError: auth.error,
        ip: ctx.ip,
        requestId: ctx.id,
        subs: null,
        drainWaiters: null,
        stalledBytes: -1,
        lastBuffered: 0,
        queued: 0,
        closed: false,
        counted: false,
        pendingClose: null,
        onClosing: null,
        signedInUntil: auth.principal?.loginSession?.expires_at ?? null,
        authCheck: null,
      };
      // The 101 carries the request id, the caller's bucket (the upgrade took from it) and the
      // replica like every answer (which replica holds the socket).
      const headers: Record<string, string> = {
        "X-Request-Id": ctx.id,
        "RateLimit-Limit": String(rl.limit),
        "RateLimit-Remaining": String(rl.remaining),
        "RateLimit-Reset": String(rl.resetSec),
      };
      if (d.replica) headers["X-Runcell-Replica"] = d.replica;
      if (protocol) headers["Sec-WebSocket-Protocol"] = protocol;
      const upgraded = (server as Server<SocketData>).upgrade(req, { data, headers });
      if (!upgraded) {
        return errorResponse(new AppError("VALIDATION_FAILED", "Malformed WebSocket handshake", { field: "upgrade" }));
      }
      d.log.info("stream connected", { request_id: ctx.id, ip: ctx.ip, user_id: auth.principal?.user.id, authenticated: !!auth.principal, url: req.url });
      return undefined;
    },
    closeAll(code, reason) {
      for (const ws of [...closing]) finishClose(ws, true);
      for (const ws of [...sockets]) close(ws, code, reason, true);
      if (backlogTimer) clearInterval(backlogTimer);
      backlogTimer = null;
    },
    revoke(key, reason = "credential revoked") {
      const k = key.tokenId ? `tok:${key.tokenId}` : key.loginSessionId ? `login:${key.loginSessionId}` : `usr:${key.userId}`;
      for (const ws of [...(index.get(k) ?? [])]) close(ws, CLOSE_AUTH, reason);
    },
    reconnect(userId, reason) {
      for (const ws of [...(index.get(`usr:${userId}`) ?? [])]) close(ws, CLOSE_RECONNECT, reason);
    },
  };
}

