/**
 * The composition root: the only place that builds and wires long-lived things. createApp(config)
 * opens the data dir and the database (migrating it), builds every service once in dependency
 * order, wires the cross-cutting hooks (a disabled user, a deleted token, a deleted session), builds
 * the two transports beside each other — the HTTP router with its pipeline and the /v1/stream
 * WebSocket server — and owns the background workers. start() listens and starts the workers in
 * order; stop() (what SIGTERM runs) drains requests, closes sockets, stops the workers in reverse
 * and closes the database.
 */
import type { Server } from "bun";
import { Audit } from "./admin/audit.ts";
import { Metrics } from "./admin/metrics.ts";
import { AdminPassword } from "./admin/password.ts";
import { RuntimeConfig } from "./admin/runtime-config.ts";
import { Stats } from "./admin/stats.ts";
import { Orchestrator } from "./agents/orchestrator.ts";
import { checkOutbound } from "./agents/outbound.ts";
import { RunSetup } from "./agents/run-setup.ts";
import { sweepGitDirs } from "./git/command.ts";
import { GitRepos } from "./git/service.ts";
import { McpManager } from "./mcp/manager.ts";
import { ModelNetwork } from "./agents/model-network.ts";
import { UsageReports } from "./agents/usage.ts";
import { Profiles, profileGone } from "./agents/profiles.ts";
import { SessionLifecycle } from "./agents/session-lifecycle.ts";
import { AgentSessions } from "./agents/sessions.ts";
import { Tasks } from "./agents/tasks.ts";
import { Transcript } from "./agents/transcript.ts";
import { Accounts } from "./auth/accounts.ts";
import { Authenticator } from "./auth/authenticate.ts";
import { OAUTH_FLOW_KEY_SETTING, OAuth } from "./auth/oauth.ts";
import { cookieOptions, LoginSessions } from "./auth/sessions.ts";
import { SetupLinks } from "./auth/setup.ts";
import { LoginThrottle } from "./auth/throttle.ts";
import { DEVICE_KEY_SETTING, DeviceCookies } from "./auth/device.ts";
import { ApiTokens } from "./auth/tokens.ts";
import { Users } from "./auth/users.ts";
import type { Config } from "./config.ts";
import { TableChanges } from "./db/changes.ts";
import { WalCheckpointer } from "./db/checkpoint.ts";
import { prepareDataDir } from "./db/data-dir.ts";
import { openStore } from "./db/store.ts";
import { Settings } from "./db/settings.ts";
import { Hub } from "./events/hub.ts";
import { EventLog } from "./events/log.ts";
import { PgEventLog } from "./events/pg-log.ts";
import { createPipeline } from "./http/pipeline.ts";
import { createRouter, forRouter } from "./http/router.ts";
import { healthCheck } from "./http/routes/health.ts";
import { spaFallback } from "./http/routes/web.ts";
import { mountRoutes } from "./http/routes/index.ts";
import { RateLimiter } from "./lib/ratelimit.ts";
import { type Bus, CHANNELS, LocalBus, PgBus } from "./replicas/bus.ts";
import { loadReplicaId, Replicas } from "./replicas/registry.ts";
import { Revocations } from "./replicas/revocations.ts";
import { KEY_FILE, Sealer } from "./lib/sealer.ts";
import { checkVaultKeyOpens } from "./vault/key-check.ts";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { intervalWorker, type Worker } from "./lib/worker.ts";
import { IdleRelease } from "./lib/memory.ts";
import { createLogger, type Logger } from "./log.ts";
import { Notifications } from "./notifications/service.ts";
import { PlaybookRuns } from "./playbooks/runs.ts";
import { PlaybookScheduler } from "./playbooks/scheduler.ts";
import { Playbooks } from "./playbooks/service.ts";
import type { Services } from "./services.ts";
import { Secrets } from "./vault/secrets.ts";
import { VERSION } from "./version.ts";
import { loadWorkspaceSettings, Workspaces } from "./workspaces/service.ts";
import { Policies } from "./admin/policy.ts";
import { CLOSE_GOING_AWAY, SIGN_IN_EXPIRED } from "./ws/connection.ts";
import { createStreamServer, type StreamServer } from "./ws/stream.ts";

export interface AppOptions {
  logger?: Logger;
  /** Milliseconds clock for expiry and scheduling logic (tests move time). */
  now?: () => number;
}

export interface App {
  readonly config: Config;
  readonly services: Services;
  /** The /v1/stream WebSocket server. */
  readonly stream: StreamServer;
  /** Base URL of the running server (after start). */
  readonly url: string;
  readonly server: Server<unknown> | null;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function createApp(config: Config, opts: AppOptions = {}): Promise<App> {
  const log = opts.logger ?? createLogger({ level: config.logLevel });
  const now = opts.now ?? Date.now;

  // Storage ---------------------------------------------------------------------------------
  const dbPath = prepareDataDir(config.dataDir);
  // The vault key before the database: a missing --vault-key-file stops the start with nothing changed.
  const keyPath = config.vaultKeyFile ?? join(config.dataDir, KEY_FILE);
  const existingKey = config.vaultKeyFile || existsSync(keyPath) ? Sealer.forConfig(config) : null;
  const store = await openStore({ databaseUrl: config.databaseUrl, sqlitePath: dbPath, log });
  // `sqlite`: the bun:sqlite connection for SQLite's own fast paths; null on PostgreSQL.
  const { db, sqlite } = store;
  // …and it must open what the database holds (a replica started without the shared key, a data dir restored without its own).
  const rows = <T>(text: string): Promise<T[]> => (store.sqlite ? Promise.resolve(store.sqlite.query(text).all() as T[]) : store.sql!.unsafe(text).then((r) => [...r] as T[]));
  await checkVaultKeyOpens(rows, existingKey, keyPath, { signingKey: store.dialect === "postgres" });
  // A new secret.key only once the database is known to hold nothing sealed with another.
  const sealer = existingKey ?? Sealer.fromDataDir(config.dataDir);
  // This server among those sharing the database, and its messages to the others (PostgreSQL).
  const replicas = new Replicas(db, now, config.replicaLeaseMs, VERSION, loadReplicaId(config.dataDir));
  await replicas.register();
  const bus: Bus = store.sql ? new PgBus(store.sql, replicas.id, (err, channel) => log.error("bus message not handled", { channel, err })) : new LocalBus();
  // Which tables changed, without a query: the hot read paths' memos (src/db/changes.ts).
  const changes = new TableChanges(sqlite);
  const settings = new Settings(db);
  const audit = new Audit(db, now, log.child({ component: "audit" }));
  const limiter = new RateLimiter(config.rateLimit.perMinute, config.rateLimit.burst);
  // Each replica enforces its share of the limits (always 1 share on SQLite).
  limiter.splitAcross(() => replicas.liveCount());

  // Identity and the operator ---------------------------------------------------------------
  const users = new Users(db, now, audit, changes);
  await users.normalizeStoredEmails(log.child({ component: "users" }));
  const tokens = new ApiTokens(db, now, undefined, audit);
  const loginSessions = new LoginSessions(db, now);
  const throttle = new LoginThrottle(now);
  // A browser that signed in with the password before is throttled per device (src/auth/device.ts).
  const devices = new DeviceCookies(await settings.sealedKey(DEVICE_KEY_SETTING, sealer), cookieOptions(config.publicUrl).secure);
  const accounts = new Accounts(config, users, loginSessions, throttle, audit, devices);
  const authenticator = new Authenticator(tokens, loginSessions, cookieOptions(config.publicUrl), changes);
  const adminPassword = new AdminPassword(settings, now, throttle, audit);
  const runtimeConfig = new RuntimeConfig(config, settings, limiter, log, audit);
  await runtimeConfig.applyAtStart();
  // PATCH /admin/config reaches every replica (the rate limit, concurrency default, sign-up, policy).
  runtimeConfig.onPatched.push((patch) => void bus.notify(CHANNELS.config, { patch }).catch((err) => log.warn("configuration change not announced to the other replicas", { err })));
  const resyncConfig = () => void runtimeConfig.resync().catch((err) => log.error("runtime configuration not re-read", { err }));
  await bus.listen(CHANNELS.config, (m) => runtimeConfig.applyPeer(m.patch as Parameters<typeof runtimeConfig.applyPeer>[0]), resyncConfig);
  const setup = new SetupLinks(db, users, accounts, config.publicUrl, now, audit);
  const oauth = new OAuth(config, db, users, accounts, now, log, await settings.sealedKey(OAUTH_FLOW_KEY_SETTING, sealer), audit);
  const stats = new Stats(db, now);
  // Read at scrape time; `stream` and `eventLog` are built below.
  const metrics = new Metrics({
    stats: () => stats.collect(),
    websockets: () => stream.size,
    eventsAppended: () => eventLog.appended,
    warmPool: () => workspaces.pool.totals(),
    startQueue: () => workspaces.hosts.queue(),
    replica: () => ({ id: replicas.id, hostname: replicas.hostname, live: replicas.liveCount() }),
  });

  // Agents ----------------------------------------------------------------------------------
  const secrets = new Secrets(db, sealer, log, now, audit);
  const policy = new Policies({ config, db, users, now });
  const modelNet = new ModelNetwork({ allowHosts: config.allowModelHosts, isAdmin: async (id) => (await users.byId(id))?.role === "admin" });
  const profiles = new Profiles(db, config, now, { policy, modelNet, pool: { state: (p) => workspaces.pool.state(p) } }, changes);
  const workspaces: Workspaces = new Workspaces({
    db, ...(await loadWorkspaceSettings(settings, sealer)), log, config, now, policy, metrics,
    // Its warm-pool members carry its id; the members of the other registered replicas are theirs (src/workspaces/peers.ts).
    replica: { id: replicas.id, shared: bus.shared, registered: async () => new Set((await replicas.list()).map((r) => r.id)) },
    envFor: async (row): Promise<Record<string, string>> => {
      const profile = await profiles.byIdAny(row.profile_id);
      // Deleted meanwhile: a command does not run without the environment it was configured with
      // (the task it belongs to ends NOT_FOUND, like a queued one of that profile).
      if (!profile || profile.user_id !== row.user_id) throw profileGone(row.profile_id);
      return await secrets.resolveEnv(row.user_id, profile.env);
    },
  });
  const notifications = new Notifications({ db, sqlite, sealer, log, now, config, audit });
  notifications.worker.onOutcome = (outcome, attempt) => metrics.webhookSettled(outcome, attempt);
  const eventLog = sqlite ? new EventLog(sqlite, now) : new PgEventLog(db, now, bus);
  if (eventLog instanceof PgEventLog) {
    eventLog.onDeliveryError = (err) => log.error("stored frames not delivered", { err });
    await eventLog.start();
  }
  eventLog.onDropped = (f, err) => log.warn("event not stored (its session is gone, or the database failed)", { session_id: f.session_id, seq: f.seq, type: f.type, err: err.message });
  const hub = new Hub(eventLog);
  const transcript = new Transcript(db, now);
  const tasks = new Tasks(db, now);
  const agentSessions = new AgentSessions(db, now, eventLog);
  const sessionLifecycle = new SessionLifecycle({ db, hub, eventLog, sessions: agentSessions, profiles, secrets, workspaces, metrics });
  // MCP servers and git repositories of sessions: connected and checked out before a run's first model request.
  const mcp = new McpManager({ workspaces, secrets, route: (userId, url) => modelNet.route(userId, url), log: log.child({ component: "mcp" }) });
  const git = new GitRepos({ secrets, net: modelNet, workspaces, diskCap: (userId) => policy.diskCapBytes(userId), log: log.child({ component: "git" }) });
  const runSetup = new RunSetup({ mcp, git, sessions: agentSessions, profiles, log });
  const orchestrator = new Orchestrator({
    log, now, db, hub, eventLog, tasks, sessions: agentSessions, transcript, profiles, secrets, workspaces, notifications, lifecycle: sessionLifecycle,
    policy, modelNet, spend: policy, metrics, setup: runSetup,
    repositoriesAllowed: (userId, repositories) => checkOutbound(modelNet, userId, { repositories }),
    playbookName: (id, tx) => playbooks.nameOf(tx, id),
    replica: replicas, bus,
    isAdmin: async (userId) => (await users.byId(userId))?.role === "admin",
  });
  // While tasks run, warm-pool refills create one container at a time: their CPU is the running sessions' latency.
  workspaces.paceRefills(() => orchestrator.busySessions > 0);
  const playbooks: Playbooks = new Playbooks({
    db, sealer, log, now, publicUrl: config.publicUrl, runs: new PlaybookRuns(db, sqlite), profiles, orchestrator, notifications, audit, policy,
    ownerDisabled: async (userId) => (await users.byId(userId))?.disabled ?? true,
  });
  const scheduler = new PlaybookScheduler(playbooks, log, now);

  const docker = workspaces.hosts.primary.engine;
  const services: Services = {
    config, log, now, db, sqlite, store, replicas, bus, settings, sealer, limiter,
    users, tokens, loginSessions, throttle, accounts, devices, authenticator, setup, oauth,
    adminPassword, runtimeConfig, stats, metrics, audit, policy, usage: new UsageReports(db, now),
    secrets, profiles, docker, workspaces, eventLog, hub, transcript, tasks, agentSessions, sessionLifecycle, orchestrator,
    mcp, git, runSetup, notifications, playbooks,
  };

  // Transports: the HTTP router behind its pipeline, and the WebSocket stream ----------------
  const router = mountRoutes(createRouter(log, adminPassword, spaFallback), services);
  const stream = createStreamServer({
    log, publicUrl: config.publicUrl, authenticator, limiter, hub, orchestrator, agentSessions, sessionLifecycle,
    maxSocketsPerCaller: config.maxSocketsPerCaller, loginSessions, now, replica: replicas.id,
  });
  const pipeline = createPipeline({
    config,
    log,
    limiter,
    authenticate: (req, path, opts) => authenticator.authenticate(req, path, opts),
    // Elysia's compiled handler itself (`handle` wraps it in an async function: always a promise).
    handle: (req) => router.fetch(forRouter(req)),
    direct: new Map([["/healthz", healthCheck(services)]]),
    upgrade: (req, server, ctx) => stream.upgrade(req, server, ctx),
    onResponse: (method, route, status, seconds) => metrics.http(method, route, status, seconds),
    replica: replicas.id,
  });

  // Hooks -------------------------------------------------------------------------------------
  // A disabled user loses every way in at once: cookie sessions deleted, cached token
  // verifications dropped (the per-request checks refuse the tokens from the next request on),
  // open sockets closed. Then their work stops, before the admin's request is answered:
  // schedules held, queued tasks failed, running ones cancelled, workspaces stopped.
  users.onDisabled.push(async (userId) => {
    await loginSessions.deleteAllForUser(userId);
    tokens.evictUser(userId);
    stream.revoke({ userId });
    revocations.announce({ disabled: userId });
    const held = await playbooks.holdForUser(userId);
    const tasksEnded = await orchestrator.stopUser(userId);
    const stopped = await workspaces.stopForUser(userId);
    // Their warm pools too (emptied, and held until they are enabled: src/workspaces/store.ts pooledProfiles).
    await workspaces.pool.sync();
    log.info("user disabled: sessions revoked, work stopped", { user_id: userId, tasks_ended: tasksEnded, workspaces_stopped: stopped.length, schedules_held: held });
  });
  users.onEnabled.push(async (userId) => {
    await playbooks.resumeForUser(userId);
    await workspaces.pool.refillAll();
  });
  // A changed role changes what a socket may receive (task:system_prompt): the user's sockets
  // reconnect (1012) and resume under it — here and on the other replicas.
  users.onRoleChanged.push((userId) => {
    stream.reconnect(userId, "role changed: reconnect");
    revocations.announce({ role: userId });
  });
  // A revoked credential closes the sockets it opened (4001) — here, and on the other replicas,
  // which also drop their cached verifications (src/replicas/revocations.ts).
  const revocations = new Revocations(bus, log);
  tokens.onRevoke.push((tokenId) => {
    stream.revoke({ tokenId });
    revocations.announce({ token: tokenId });
  });
  loginSessions.onRevokeSession.push((loginSessionId, expired) => {
    stream.revoke({ loginSessionId }, expired ? SIGN_IN_EXPIRED : undefined);
    revocations.announce(expired ? { login: loginSessionId, expired: true } : { login: loginSessionId });
  });
  loginSessions.onRevokeUser.push((userId) => {
    stream.revoke({ userId });
    revocations.announce({ user: userId });
  });
  await revocations.listen({
    token: (tokenId) => {
      tokens.forget([tokenId]);
      stream.revoke({ tokenId });
    },
    login: (loginSessionId, expired) => stream.revoke({ loginSessionId }, expired ? SIGN_IN_EXPIRED : undefined),
    user: (userId) => stream.revoke({ userId }),
    disabled: (userId) => {
      tokens.evictUser(userId);
      stream.revoke({ userId });
    },
    role: (userId) => stream.reconnect(userId, "role changed: reconnect"),
  });
  // A session being deleted first stops its running task and holds its queue until its rows are
  // gone: a queued task goes with the session instead of starting on the workspace being removed.
  sessionLifecycle.onDelete.push((sessionId) => orchestrator.holdSession(sessionId));
  // …and its MCP servers.
  sessionLifecycle.onDelete.push((sessionId) => mcp.closeSession(sessionId));
  // A workspace removed on its own (DELETE /v1/workspaces/:id, /admin/workspaces/:id) stops the same
  // work first: its task ends cancelled rather than running on against a container that is gone;
  // the session's queued task waits for the removal (held), then starts on a fresh workspace.
  workspaces.onRemove.push((sessionId) => orchestrator.holdSession(sessionId));
  workspaces.onRemove.push((sessionId) => mcp.closeSession(sessionId));
  // A changed schedule re-arms the scheduler; a deleted profile's playbooks stop.
  playbooks.onScheduleChange.push(() => scheduler.rearm());
  // …here and on the other replicas (which re-read the earliest due time; at most once, so they
  // also re-arm whenever their LISTEN connection comes back).
  const rearmFromPeers = () => void scheduler.rearm().catch((err) => log.error("playbook schedules not re-read", { err }));
  playbooks.onScheduleChange.push(() => bus.notify(CHANNELS.schedules, {}).catch((err) => log.warn("schedule change not announced to the other replicas", { err })));
  profiles.onDelete.push((profileId, userId) => playbooks.disableForProfile(profileId, userId));
  // A profile's warm pool follows it: resized, drained when its containers would differ, removed with it.
  profiles.onUpdate.push((_before, after) => workspaces.pool.profileChanged(after.id));
  profiles.onUpdate.push((_before, after) => {
    void mcp.profileChanged(after.id, after.mcp_servers ?? [], (sessionId) => orchestrator.isRunning(sessionId)).catch((err) => log.warn("MCP servers of a changed profile not closed", { profile: after.id, err }));
  });
  profiles.onDelete.push((profileId) => void workspaces.pool.profileDeleted(profileId));

  const idleRelease = new IdleRelease({ busy: () => orchestrator.busySessions > 0 });
  // Background work, started in this order and stopped in reverse ----------------------------
  const checkpointer = sqlite ? new WalCheckpointer(sqlite, dbPath, log) : null;
  const workers: Worker[] = [
    ...(checkpointer ? [{ name: "wal-checkpoint", start: () => checkpointer.start(), stop: () => checkpointer.stop() }] : []),
    intervalWorker(log, "replica-heartbeat", replicas.heartbeatMs, () => replicas.heartbeat()),
    { name: "admin-password", start: () => adminPassword.applyConfigured(config, log), stop() {} },
    intervalWorker(log, "login-throttle-sweep", 60_000, () => throttle.sweep()),
    intervalWorker(log, "login-session-purge", 3_600_000, async () => {
      const n = await loginSessions.purgeExpired();
      if (n) log.info("expired login sessions purged", { count: n });
    }),
    intervalWorker(log, "ratelimit-sweep", 60_000, () => limiter.sweep()),
    // Once a burst is over (no task running for 2 s) the memory it freed goes back to the system.
    intervalWorker(log, "idle-memory-release", 1000, () => {
      const freed = idleRelease.check();
      if (freed) log.debug("memory returned to the system after a burst", { freed_mib: Math.round(freed / 1048576) });
    }),
    intervalWorker(
      log,
      "audit-purge",
      3_600_000,
      async () => {
        const n = await audit.purge(now() - config.auditRetentionMs);
        if (n) log.info("old audit log rows purged", { count: n, retention_ms: config.auditRetentionMs });
      },
      { runAtStart: true },
    ),
    { name: "notification-delivery", start: () => notifications.worker.start(), stop: () => notifications.worker.stop() },
    // A server killed mid-clone or mid-push left its git working directory (for ssh, the key file too).
    {
      name: "git-leftovers",
      start: () =>
        void sweepGitDirs().then(
          (n) => n && log.info("leftover git working directories removed", { count: n }),
          (err) => log.warn("leftover git working directories not removed", { err }),
        ),
      stop() {},
    },
    ...workspaces.workers(),
    // MCP servers of sessions idle as long as an idle workspace are closed (reconnected at the next task).
    intervalWorker(log, "mcp-idle-close", 60_000, () => mcp.sweep(config.workspaceIdleTimeoutMs, Date.now(), (sessionId) => orchestrator.isRunning(sessionId))),
    // After the workspace reconciliation: resume interrupted tasks, start queued ones.
    {
      name: "agent-runtime",
      start: () => orchestrator.recover(),
      stop: async () => {
        await orchestrator.stop();
        await mcp.closeAll();
        // Everything handed out is stored now: unused reserved seqs are given back (no gap at the next start).
        await eventLog.settle();
      },
    },
    // PostgreSQL replicas: announcements are at most once (a replica that crashed between saving a
    // change and announcing it, a LISTEN connection down at that moment): every minute each replica
    // re-reads the saved configuration and the earliest due schedule slot anyway.
    ...(bus.shared
      ? [
          intervalWorker(log, "replica-resync", 60_000, async () => {
            await runtimeConfig.resync();
            await scheduler.rearm();
          }),
        ]
      : []),
    // PostgreSQL replicas: tasks of a replica that died (or stopped) are continued here once their lease runs out.
    ...(bus.shared ? [intervalWorker(log, "task-takeover", replicas.heartbeatMs, () => orchestrator.takeOver())] : []),
    // After the recovery: due schedule slots (also those missed while stopped) fire once each.
    {
      name: "playbook-scheduler",
      async start() {
        await bus.listen(CHANNELS.schedules, rearmFromPeers, rearmFromPeers);
        await scheduler.start();
      },
      stop: () => scheduler.stop(),
    },
  ];

  let server: Server<unknown> | null = null;
  let url = "";
  let stopping: Promise<void> | null = null;

  return {
    config,
    services,
    stream,
    get url() {
      return url;
    },
    get server() {
      return server;
    },
    async start() {
      // Before the first request: no replay may show an interrupted answer the resumed task will repeat.
      await orchestrator.prepareResume();
      const srv = Bun.serve({
        hostname: config.host,
        port: config.port,
        development: false,
        // Bun's own limit answers a bare 413 (no error body, no headers) before the pipeline runs,
        // so it is set out of reach: every body is read by http/parse.ts, which refuses a declared
        // or streamed body over its route's limit (1 MiB, 64 KiB for triggers) with the interface's
        // 413 and stops reading. An unread body is discarded by Bun, not buffered.
        maxRequestBodySize: 2 ** 40,
        idleTimeout: 60,
        fetch: pipeline,
        websocket: stream.handlers,
        error(err) {
          log.error("server error", { err });
          return new Response(JSON.stringify({ error: "Internal server error", code: "INTERNAL_ERROR" }), { status: 500, headers: { "content-type": "application/json" } });
        },
      });
      server = srv;
      hub.useNativePublish((topic, json) => void srv.publish(topic, json));
      url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${srv.port}`;
      for (const w of workers) await w.start();
      log.info("runcell listening", { version: VERSION, replica: replicas.id, url, public_url: config.publicUrl, data_dir: config.dataDir });
    },
    stop() {
      stopping ??= (async () => {
        log.info("shutting down");
        const srv = server;
        if (srv) {
          // Stop accepting; in-flight requests get up to shutdownTimeout to finish.
          const drained = srv.stop(false);
          stream.closeAll(CLOSE_GOING_AWAY, "server shutting down");
          const timedOut = await Promise.race([
            drained.then(() => false),
            new Promise<boolean>((r) => setTimeout(() => r(true), config.shutdownTimeoutMs).unref?.()),
          ]);
          if (timedOut) {
            log.warn("in-flight requests did not finish in time; closing them", { timeout_ms: config.shutdownTimeoutMs });
            await srv.stop(true);
          }
        }
        hub.useNativePublish(null);
        for (const w of [...workers].reverse()) {
          try {
            await w.stop(config.shutdownTimeoutMs);
          } catch (e) {
            log.error("worker failed to stop", { worker: w.name, err: e });
          }
        }
        await bus.close();
        await replicas.leave().catch((err) => log.warn("replica row not removed", { err }));
        await store.close();
        log.info("stopped");
      })();
      return stopping;
    },
  };
}
