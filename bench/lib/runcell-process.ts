/**
 * A runcell server as a separate process, for the benchmarks that measure the server's own memory
 * (soak, memory): built from the current source into a temporary directory (dist/runcell is left
 * alone; a tree that does not build right now falls back to dist/runcell), or run from source with
 * `--source`; its CLI for the user and token; `serve` with the flags a benchmark needs; a JSON client.
 */
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../../test/helpers/app.ts";
import { freePort, ROOT, waitHttp } from "./util.ts";

export interface RuncellProcess {
  dir: string;
  dataDir: string;
  /** The command that runs runcell (the binary, or bun and src/main.ts). */
  cmd: string[];
  /** Runs a CLI command on this data dir; its stdout (throws on a non-zero exit). */
  cli(args: string[], stdin?: string): Promise<string>;
}

/** A temporary directory (removed at exit) with the runcell to run in it. */
export function prepareRuncell(name: string, opts: { fromSource: boolean; preload?: string }): RuncellProcess {
  const dir = tempDir(`runcell-bench-${name}-`);
  const dataDir = join(dir, "data");
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  let cmd: string[];
  if (opts.fromSource) cmd = ["bun", ...(process.env.BENCH_BUN_FLAGS ? process.env.BENCH_BUN_FLAGS.split(" ") : []), ...(opts.preload ? ["--preload", opts.preload] : []), join(ROOT, "src/main.ts")];
  else {
    const bin = join(dir, "runcell");
    const b = Bun.spawnSync(["bun", "run", "scripts/build.ts", bin], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
    if (b.exitCode === 0) cmd = [bin];
    else if (existsSync(join(ROOT, "dist/runcell"))) {
      console.log(`  (the current source does not build: ${b.stderr.toString().trim().split("\n").at(-1)}; using dist/runcell)`);
      cmd = [join(ROOT, "dist/runcell")];
    } else throw new Error("build failed: " + b.stderr.toString() + b.stdout.toString());
  }
  const cli = async (args: string[], stdin?: string) => {
    const p = Bun.spawn([...cmd, ...args, "--data-dir", dataDir], { cwd: dir, stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin), stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    if (code !== 0) throw new Error(`runcell ${args.join(" ")}: ${err || out}`);
    return out;
  };
  return { dir, dataDir, cmd, cli };
}

/** An ordinary (non-admin) user and an API token for it. */
export async function userToken(r: RuncellProcess, email: string): Promise<string> {
  await r.cli(["admin", "create-user", "--email", email, "--role", "user", "--password-stdin"], "correct horse battery");
  return /rc_[0-9a-f]{64}/.exec(await r.cli(["token", "create", "--email", email, "--name", "bench"]))![0];
}

export interface Served {
  url: string;
  proc: ReturnType<typeof Bun.spawn>;
  /** The server's stderr, complete once it exits. */
  stderr: Promise<string>;
  /** A JSON request with the token; throws on a status ≥ 400. */
  api(method: string, path: string, body?: unknown): Promise<any>;
}

/**
 * `runcell serve` on a free loopback port with the test workspace image, a loopback model server
 * allowed (its port), the rate limit out of the way, plus `flags`; resolves once /healthz answers.
 */
export async function serveRuncell(r: RuncellProcess, o: { token: string; image: string; modelPort: string; flags?: string[] }): Promise<Served> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = Bun.spawn(
    [
      ...r.cmd, "serve",
      "--data-dir", r.dataDir,
      "--http", `127.0.0.1:${port}`,
      "--log-level", "error",
      "--workspace-image", o.image,
      "--allow-model-hosts", `127.0.0.1:${o.modelPort}`,
      "--rate-limit-per-minute", "1000000",
      "--rate-limit-burst", "1000000",
      ...(o.flags ?? []),
    ],
    { cwd: r.dir, stdout: "ignore", stderr: "pipe" },
  );
  const stderr = new Response(proc.stderr).text();
  // BENCH_SERVER_STDERR=<file>: the server's stderr is also written there once it exits (e.g. with BUN_JSC_logGC=1).
  if (process.env.BENCH_SERVER_STDERR) void stderr.then((t) => Bun.write(process.env.BENCH_SERVER_STDERR!, t));
  const headers = { authorization: `Bearer ${o.token}`, "content-type": "application/json" };
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    if (res.status >= 400) throw new Error(`${method} ${path} → ${res.status}: ${text}`);
    return text ? JSON.parse(text) : null;
  };
  try {
    await waitHttp(`${url}/healthz`);
  } catch (e) {
    proc.kill();
    throw new Error(`runcell serve did not answer: ${e instanceof Error ? e.message : e}; stderr: ${(await stderr).slice(0, 2000)}`);
  }
  return { url, proc, stderr, api };
}
