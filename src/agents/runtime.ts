/**
 * Builds the agent runtime — event log, hub, transcript, task and session stores, orchestrator —
 * and the /v1/stream WebSocket server on top of it, with their workers: recovery of interrupted
 * tasks at start (after the workspace reconciliation), and an orderly stop that leaves running
 * tasks resumable.
 */
import type { Database } from "bun:sqlite";
import type { Authenticator } from "../auth/authenticate.ts";
import type { LoginSessions } from "../auth/sessions.ts";
import type { ApiTokens } from "../auth/tokens.ts";
import type { DB } from "../db/client.ts";
import { Hub } from "../events/hub.ts";
import { EventLog } from "../events/log.ts";
import type { RateLimiter } from "../lib/ratelimit.ts";
import type { Logger } from "../log.ts";
import type { Worker } from "../lib/worker.ts";
import { createStreamServer, type StreamServer } from "../ws/stream.ts";
import type { NotificationsDep, ProfilesDep, SecretsDep, WorkspacesDep } from "./deps.ts";
import { Orchestrator } from "./orchestrator.ts";
import { AgentSessions } from "./sessions.ts";
import { Tasks } from "./tasks.ts";
import { Transcript } from "./transcript.ts";

export interface Runtime {
  eventLog: EventLog;
  hub: Hub;
  transcript: Transcript;
  tasks: Tasks;
  agentSessions: AgentSessions;
  orchestrator: Orchestrator;
  stream: StreamServer;
}

export interface RuntimeInput {
  log: Logger;
  now: () => number;
  db: DB;
  sqlite: Database;
  publicUrl: string;
  profiles: ProfilesDep;
  secrets: SecretsDep;
  workspaces: WorkspacesDep;
  notifications: NotificationsDep;
  authenticator: Authenticator;
  limiter: RateLimiter;
  tokens: ApiTokens;
  loginSessions: LoginSessions;
  /** Hook lists of the identity services, so revoked credentials close their sockets. */
  onUserDisabled?: ((userId: string) => void)[];
  workers: Worker[];
}

export function buildRuntime(i: RuntimeInput): Runtime {
  const eventLog = new EventLog(i.sqlite, i.now);
  eventLog.onDropped = (f, err) => i.log.warn("event not stored: its session is gone", { session_id: f.session_id, seq: f.seq, type: f.type, err: err.message });
  const hub = new Hub(eventLog);
  const transcript = new Transcript(i.db, i.now);
  const tasks = new Tasks(i.db, i.now);
  const agentSessions = new AgentSessions(i.db, i.now, eventLog);
  const orchestrator = new Orchestrator({
    log: i.log,
    now: i.now,
    db: i.db,
    hub,
    tasks,
    sessions: agentSessions,
    transcript,
    profiles: i.profiles,
    secrets: i.secrets,
    workspaces: i.workspaces,
    notifications: i.notifications,
  });
  const stream = createStreamServer({ log: i.log, publicUrl: i.publicUrl, authenticator: i.authenticator, limiter: i.limiter, hub, orchestrator, agentSessions });

  i.tokens.onRevoke.push((tokenId) => stream.revoke({ tokenId }));
  i.loginSessions.onRevokeSession.push((loginSessionId) => stream.revoke({ loginSessionId }));
  i.loginSessions.onRevokeUser.push((userId) => stream.revoke({ userId }));
  i.onUserDisabled?.push((userId) => stream.revoke({ userId }));

  i.workers.push({
    name: "agent-runtime",
    start: () => orchestrator.recover(),
    stop: async () => {
      await orchestrator.stop();
      eventLog.flush();
    },
  });
  return { eventLog, hub, transcript, tasks, agentSessions, orchestrator, stream };
}
