/**
 * runcell as a separate process (`bun src/main.ts serve`), for tests that kill it — SIGTERM or
 * `kill -9` — and start it again on the same data dir.
 */
import { join } from "node:path";
import { OPEN_POLICY } from "./app.ts";
import { freePort, waitFor } from "./net.ts";
import { databaseArgs } from "./pg.ts";

const ROOT = join(import.meta.dir, "..", "..");

export interface ServerProcess {
  url: string;
  port: number;
  proc: ReturnType<typeof Bun.spawn>;
  output(): string;
  kill(signal?: NodeJS.Signals | number): Promise<number>;
}

export async function spawnServer(opts: { dataDir: string; port?: number; flags?: string[]; env?: Record<string, string> }): Promise<ServerProcess> {
  const port = opts.port ?? (await freePort());
  const chunks: string[] = [];
  const proc = Bun.spawn(
    [
      "bun", join(ROOT, "src/main.ts"), "serve",
      "--http", `127.0.0.1:${port}`,
      "--data-dir", opts.dataDir,
      // The PostgreSQL pass: the data dir's database (the same one across restarts), as startTestApp;
      // a test that names its own --database keeps it.
      ...(opts.flags?.includes("--database") ? [] : await databaseArgs(opts.dataDir)),
      "--rate-limit-per-minute", "1000000",
      "--rate-limit-burst", "1000000",
      "--workspace-image", process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest",
      "--allow-private-webhooks",
      ...OPEN_POLICY,
      ...(opts.flags ?? []),
    ],
    { cwd: ROOT, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", ...opts.env }, stdout: "pipe", stderr: "pipe" },
  );
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const reader = s.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      chunks.push(new TextDecoder().decode(value));
    }
  };
  void pump(proc.stdout as ReadableStream<Uint8Array>);
  void pump(proc.stderr as ReadableStream<Uint8Array>);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(url + "/healthz")).ok, { timeoutMs: 20_000, what: `server on ${url}: ${chunks.join("")}` });
  return {
    url,
    port,
    proc,
    output: () => chunks.join(""),
    async kill(signal = "SIGTERM") {
      proc.kill(signal);
      return await proc.exited;
    },
  };
}
