/**
 * Issue 16 benchmark: checking a 50 MB repository out into a workspace (runcell's GitClone step:
 * the clone on the server with the vault's credential, then the copy into the workspace's volume
 * through Docker's archive API) against `git clone` of the same repository on the host, with the
 * same depth (1) and credential, from git's own http-backend on loopback. Median of ROUNDS; goal
 * ≤ 1.5×. Never fails on timing.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestApp } from "../test/helpers/app.ts";
import { startGitServer } from "../test/helpers/git-server.ts";
import { startMockAnthropic } from "../test/helpers/mock-anthropic.ts";
import { createUser } from "../test/helpers/users.ts";
import { median, report } from "./lib/util.ts";

const MB = Number(process.env.BENCH_GIT_MB ?? 50);
const ROUNDS = Number(process.env.BENCH_GIT_ROUNDS ?? 3);

const t = await startTestApp({ flags: ["--log-level", "error"] });
const srv = await startGitServer();
const mock = startMockAnthropic().script(() => ({ text: "ok" }));
try {
  console.error(`creating a ${MB} MB repository…`);
  const url = await srv.createLargeRepo("big", MB * 1024 * 1024);
  const user = await createUser(t);
  await fetch(`${t.url}/v1/secrets/GIT`, { method: "PUT", headers: user.bearer, body: JSON.stringify({ value: `${srv.user}:${srv.password}` }) });
  const pr = await fetch(`${t.url}/v1/profiles`, {
    method: "POST",
    headers: user.bearer,
    body: JSON.stringify({ name: "git bench", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: t.config.workspaceImage, network: "none", tools: [], repositories: [{ url, credential_secret: "GIT" }], limits: { max_concurrency: 50 } }),
  });
  const profileId = ((await pr.json()) as { id: string }).id;

  const host: number[] = [];
  const runcell: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // The host's git, same depth and credential (in the URL here: a throwaway local server).
    const dir = mkdtempSync(join(tmpdir(), "bench-clone-"));
    const authed = url.replace("://", `://${srv.user}:${srv.password}@`);
    const t0 = performance.now();
    const p = Bun.spawn(["git", "-c", "credential.helper=", "clone", "-q", "--depth", "1", "--single-branch", authed, join(dir, "big")], { env: { ...process.env, GIT_TERMINAL_PROMPT: "0" }, stderr: "pipe" });
    if ((await p.exited) !== 0) throw new Error(`host clone failed: ${await new Response(p.stderr).text()}`);
    host.push(performance.now() - t0);
    rmSync(dir, { recursive: true, force: true });

    // runcell: GitClone step, tool_use → tool_result frames at a WebSocket subscriber.
    const ws = new WebSocket(`${t.wsUrl}/v1/stream`, [`Bearer.${user.token}`]);
    await new Promise((r) => ws.addEventListener("open", r, { once: true }));
    let started = 0;
    const took = new Promise<number>((resolve, reject) => {
      ws.addEventListener("message", (m) => {
        const f = JSON.parse(m.data as string);
        if (f.type === "task:tool_use" && f.tool === "GitClone") started = performance.now();
        if (f.type === "task:tool_result" && f.tool === "GitClone") (f.is_error ? reject(new Error(f.output)) : resolve(performance.now() - started));
      });
    });
    ws.send(JSON.stringify({ type: "task.submit", profile_id: profileId, prompt: "clone" }));
    runcell.push(await took);
    ws.close();
  }
  console.log(`# git clone benchmark (${MB} MB of incompressible files, depth 1, ${ROUNDS} rounds, median) — ${new Date().toISOString()}`);
  console.log(`host git clone: ${host.map((x) => x.toFixed(0)).join(", ")} ms; runcell GitClone: ${runcell.map((x) => x.toFixed(0)).join(", ")} ms`);
  report(`clone ${MB} MB: runcell into a workspace vs host`, median(runcell), median(host), "ms", "≤1.5×", "lower");
} finally {
  await t.stop();
  await mock.stop();
  await srv.stop();
}
