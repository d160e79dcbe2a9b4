/**
 * The single binary: build dist/runcell, copy it into an empty directory with no node_modules
 * anywhere above it, run it, get 200 from /healthz, SIGTERM it, and find exit 0 and a database.
 */
import { expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { freePort, waitFor } from "./helpers/net.ts";

const ROOT = join(import.meta.dir, "..");

test("the compiled binary runs on its own and shuts down cleanly", async () => {
  const build = Bun.spawnSync(["bun", "run", "scripts/build.ts"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  expect(build.exitCode, build.stderr.toString()).toBe(0);

  const dir = mkdtempSync("/tmp/runcell-bin-");
  for (let d = dir; d !== "/"; d = dirname(d)) expect(existsSync(join(d, "node_modules"))).toBe(false);
  copyFileSync(join(ROOT, "dist/runcell"), join(dir, "runcell"));
  Bun.spawnSync(["chmod", "+x", join(dir, "runcell")]);

  const port = await freePort();
  const proc = Bun.spawn(["./runcell", "serve", "--http", `127.0.0.1:${port}`], {
    cwd: dir,
    env: { PATH: "/usr/bin:/bin" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const res = await waitFor(async () => {
    const r = await fetch(`http://127.0.0.1:${port}/healthz`);
    return r.status === 200 ? r : null;
  }, { timeoutMs: 15_000, what: "/healthz" });
  expect(await res.json()).toMatchObject({ status: "ok", db: "ok" });

  proc.kill("SIGTERM");
  expect(await proc.exited).toBe(0);
  const out = await new Response(proc.stdout).text();
  expect(out).toContain('"msg":"stopped"');
  expect(existsSync(join(dir, "runcell_data", "runcell.db"))).toBe(true);
  expect(statSync(join(dir, "runcell_data")).mode & 0o777).toBe(0o700);
}, 120_000);
