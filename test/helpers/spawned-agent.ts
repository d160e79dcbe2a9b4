/**
 * The set-up of the tests that stop the server (kill -9, SIGTERM) in the middle of a task and start
 * it again on the same data dir: a runcell process (helpers/server-process.ts), one account made
 * with the CLI as an operator makes it before `serve` (helpers/cli.ts), and one profile whose model
 * is a local mock server. Calls go to whichever server process is current.
 */
import { tempDir } from "./app.ts";
import { cliAccount } from "./cli.ts";
import { waitFor } from "./net.ts";
import { databaseArgs, dropDatabaseFor } from "./pg.ts";
import { type ServerProcess, spawnServer } from "./server-process.ts";

export const TEST_IMAGE = process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest";
const ENDED = ["completed", "failed", "cancelled"];

export interface SpawnedAgent {
  dataDir: string;
  token: string;
  /** The profile as POST /v1/profiles answered it. */
  profile: any;
  /** The server process running now (replaced by `restart`). */
  readonly server: ServerProcess;
  /** Bearer and JSON content-type headers of the account. */
  headers: Record<string, string>;
  /** An API call as the account; answers the parsed JSON body (null when empty). */
  call(method: string, path: string, body?: unknown): Promise<any>;
  get(path: string): Promise<any>;
  /** POST /v1/tasks on the profile; answers `{task_id, session_id, …}`. */
  submit(prompt: string, extra?: Record<string, unknown>): Promise<any>;
  /** Waits until the task has ended and answers it. */
  finished(taskId: string, opts?: { timeoutMs?: number; what?: string }): Promise<any>;
  /** The session's stored events (the first 1,000). */
  events(sessionId: string): Promise<any[]>;
  /** Stops the server process with `signal`; answers its exit code. */
  kill(signal: NodeJS.Signals): Promise<number>;
  /** Starts a server again on the same data dir (the previous one must be stopped). */
  restart(): Promise<ServerProcess>;
  /** Deletes the session (when given), stops the server, drops the PostgreSQL pass's database. */
  close(sessionId?: string): Promise<void>;
}

/**
 * `name` names the account (`<name>@example.com`), its token and its profile. `profile`: fields
 * added to (or replacing) the profile's defaults: the Anthropic-format `modelUrl`, the test image,
 * network "none". `flags`: extra `serve` flags, given at every start.
 */
export async function spawnedAgent(name: string, opts: { modelUrl: string; profile?: Record<string, unknown>; flags?: string[] }): Promise<SpawnedAgent> {
  const dataDir = tempDir();
  // The PostgreSQL pass: the CLI works on the database the spawned server uses.
  const token = await cliAccount(dataDir, await databaseArgs(dataDir), `${name}@example.com`, name);
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  let server = await spawnServer({ dataDir, flags: opts.flags });
  const call = async (method: string, path: string, body?: unknown) => {
    const text = await (await fetch(server.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })).text();
    return text ? JSON.parse(text) : null;
  };
  const profile = await call("POST", "/v1/profiles", {
    name,
    model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: opts.modelUrl },
    image: TEST_IMAGE,
    network: "none",
    ...opts.profile,
  });
  if (!/^prof_/.test(profile?.id ?? "")) throw new Error(`profile not created: ${JSON.stringify(profile)}`);
  return {
    dataDir,
    token,
    profile,
    get server() {
      return server;
    },
    headers,
    call,
    get: (path) => call("GET", path),
    async submit(prompt, extra = {}) {
      const sub = await call("POST", "/v1/tasks", { profile_id: profile.id, prompt, ...extra });
      if (!/^task_/.test(sub?.task_id ?? "")) throw new Error(`task not submitted: ${JSON.stringify(sub)}`);
      return sub;
    },
    finished: (taskId, o = {}) =>
      waitFor(async () => {
        const r = await call("GET", `/v1/tasks/${taskId}`);
        return ENDED.includes(r.status) ? r : null;
      }, { timeoutMs: o.timeoutMs ?? 30_000, what: o.what ?? "task ended" }),
    events: async (sessionId) => (await call("GET", `/v1/sessions/${sessionId}/events?limit=1000`)).data as any[],
    kill: (signal) => server.kill(signal),
    async restart() {
      server = await spawnServer({ dataDir, flags: opts.flags });
      return server;
    },
    async close(sessionId) {
      if (sessionId) await call("DELETE", `/v1/sessions/${sessionId}`).catch(() => {});
      await server.kill("SIGTERM");
      await dropDatabaseFor(dataDir);
    },
  };
}
