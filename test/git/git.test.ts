/**
 * Git repositories of a profile or a session, end to end: a bare repository served over HTTP by
 * git's own http-backend on loopback, demanding a credential; cloned into a workspace with
 * network "none" before the first turn; the agent commits (git in the test MCP image) and pushes
 * with GitPush — and the user with POST /v1/sessions/:id/git/push — while the credential never
 * enters the workspace (files, .git/config, env, docker inspect). A wrong credential fails the
 * task clearly and leaves nothing behind.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createProfile, lastToolResults, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { type GitServer, startGitServer } from "../helpers/git-server.ts";
import { MCP_IMAGE } from "../helpers/mcp-server.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;
let other: TestUser;
let srv: GitServer;
let repoUrl: string;

/** A profile on the test MCP image (node, git, the reference MCP server) with a scripted model; `body` adds its fields. */
const profile = (body: Record<string, unknown>) => createProfile(t, user, { mock, tools: ["Bash"], image: MCP_IMAGE, limits: { memory_mb: 256, cpus: 1, pids: 256 }, extra: body });

const docker = (...args: string[]) => Bun.spawnSync(["docker", ...args]).stdout.toString();

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  user = await createUser(t);
  other = await createUser(t);
  srv = await startGitServer();
  repoUrl = await srv.createRepo("app", { "README.md": "# app\n", "src/main.txt": "hello\n" });
  expect((await api(t, "PUT", "/v1/secrets/GIT_TOKEN", user.bearer, { value: `${srv.user}:${srv.password}` })).status).toBe(204);
  expect((await api(t, "PUT", "/v1/secrets/GIT_WRONG", user.bearer, { value: `${srv.user}:not-the-password` })).status).toBe(204);
});
afterAll(async () => {
  await t?.stop();
  await mock?.stop();
  await srv?.stop();
});

describe("clone, commit, push", () => {
  let sessionId: string;

  test("cloned before the first turn; the agent commits and pushes with GitPush; the credential never enters the workspace", async () => {
    const id = await profile({ repositories: [{ url: repoUrl, credential_secret: "GIT_TOKEN" }] });
    mock.reset();
    const commit = "cd /workspace/app && cat README.md && echo change >> README.md && git -c user.name=agent -c user.email=agent@example.test commit -qam 'agent change' && git log --oneline -1";
    mock.enqueue(
      { toolCalls: [{ name: "Bash", input: { command: commit } }] },
      { toolCalls: [{ name: "GitPush", input: { path: "/workspace/app" } }] },
      { text: "pushed" },
    );
    const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "change the readme and push" });
    sessionId = session_id;
    const task = await waitTask(t, user, task_id, undefined, 60_000);
    expect(task.status, JSON.stringify(task)).toBe("completed");

    // The clone shows in the stream as a step before the model's first request; the model is told.
    const frames = await sessionFrames(t, user, session_id);
    const clone = frames.find((f) => f.type === "task:tool_use" && f.tool === "GitClone");
    expect(clone.input).toMatchObject({ url: repoUrl, path: "/workspace/app" });
    const cloned = frames.find((f) => f.type === "task:tool_result" && f.tool_use_id === clone.tool_use_id);
    expect(cloned.is_error).toBe(false);
    expect(cloned.output).toMatch(/^Cloned .* into \/workspace\/app at [0-9a-f]{40}/);
    expect(mock.requests[0]!.body.system).toContain("/workspace/app");
    expect(mock.requests[0]!.body.tools.map((x: any) => x.name)).toContain("GitPush");

    expect(lastToolResults(mock.requests[1]!.body)[0]!.content).toContain("# app");
    const pushed = lastToolResults(mock.requests[2]!.body)[0]!;
    expect(pushed.is_error).toBeFalsy();
    const sha = /at commit ([0-9a-f]{40})/.exec(pushed.content)?.[1];
    expect(sha, pushed.content).toBeDefined();
    const log = await srv.log("app");
    expect(log.split("\n")[0]).toBe(`${sha}\tagent change`);

    // Nowhere in the workspace: files, .git/config, the environment, the process list, docker inspect.
    const row = (await t.app.services.workspaces.forSession(session_id))!;
    // The needle goes in on stdin, so it is not in the process list being checked.
    const inside = Bun.spawnSync(["docker", "exec", "-i", row.docker_id!, "sh", "-c", 'read -r p; grep -rl "$p" /workspace /tmp /root 2>/dev/null; cat /workspace/app/.git/config; env; ps -o args'], { stdin: Buffer.from(srv.password + "\n") }).stdout.toString();
    expect(inside).toContain("[remote \"origin\"]");
    expect(inside).not.toContain(srv.password);
    expect(docker("inspect", row.docker_id!)).not.toContain(srv.password);
    expect(JSON.stringify(frames)).not.toContain(srv.password);
    expect(t.logs.join("\n")).not.toContain(srv.password);
    // The workspace has no network: the clone came from the server side.
    expect(docker("inspect", "-f", "{{.HostConfig.NetworkMode}}", row.docker_id!).trim()).toBe("none");
  });

  test("the user pushes with POST /v1/sessions/:id/git/push, to another branch", async () => {
    const r = await api(t, "POST", `/v1/sessions/${sessionId}/git/push`, user.bearer, { path: "app", remote_branch: "feature/x" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ repository: repoUrl, path: "/workspace/app", branch: "main", remote_branch: "feature/x", status: "pushed" });
    expect((await srv.log("app", "feature/x")).split("\n")[0]).toStartWith(r.body.commit);
    const again = await api(t, "POST", `/v1/sessions/${sessionId}/git/push`, user.bearer, { path: "/workspace/app", branch: "main", remote_branch: "feature/x" });
    expect(again.body.status).toBe("up_to_date");
  });

  test("a push the remote's hook refuses says the remote's reason", async () => {
    const hook = join(srv.root, "app.git", "hooks", "pre-receive");
    writeFileSync(hook, '#!/bin/sh\nwhile read old new ref; do [ "$ref" = refs/heads/protected ] && { echo "branch protected is protected: open a pull request"; exit 1; }; done\nexit 0\n', { mode: 0o755 });
    try {
      const r = await api(t, "POST", `/v1/sessions/${sessionId}/git/push`, user.bearer, { path: "app", remote_branch: "protected" });
      expect(r.status).toBe(502);
      expect(r.body.code).toBe("BAD_GATEWAY");
      expect(r.body.error).toContain("pre-receive hook declined");
      expect(r.body.error).toContain("; it said: branch protected is protected: open a pull request");
    } finally {
      rmSync(hook, { force: true });
    }
  });

  test("a remote that quotes the credential back: the REST error shows it redacted, in every form", async () => {
    const hook = join(srv.root, "app.git", "hooks", "pre-receive");
    const basic = Buffer.from(`${srv.user}:${srv.password}`).toString("base64");
    // Also past the 500 characters a remote's words are cut to: the cut must not split the credential.
    // Also where the remote's words are cut (500 characters): padded so the cut falls 6 characters into the password.
    const first = `push denied: token ${srv.user}:${srv.password} (${basic}) has no write access`;
    const pad = 500 - first.length - 1 - 1 - (srv.user.length + 1) - 6;
    writeFileSync(hook, `#!/bin/sh\necho "${first}"\nprintf '%0${pad}d %s\\n' 0 "${srv.user}:${srv.password}"\nexit 1\n`, { mode: 0o755 });
    try {
      const r = await api(t, "POST", `/v1/sessions/${sessionId}/git/push`, user.bearer, { path: "app", remote_branch: "agent/quoted" });
      expect(r.status).toBe(502);
      expect(r.body.error).toContain("push denied: token");
      expect(r.body.error).toContain("[redacted secret]");
      expect(r.body.error).not.toContain(srv.password);
      expect(r.body.error).not.toContain(`${srv.user}:${srv.password.slice(0, 6)}`);
      expect(r.body.error).not.toContain(basic.replace(/=+$/, ""));
      expect(t.logs.join("\n")).not.toContain(srv.password);
    } finally {
      rmSync(hook, { force: true });
    }
  });

  test("a second task in the session does not clone again", async () => {
    mock.reset();
    mock.enqueue({ text: "ok" });
    const { task_id } = await submit(t, user, { session_id: sessionId, prompt: "again" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const clones = (await sessionFrames(t, user, sessionId)).filter((f) => f.type === "task:tool_use" && f.tool === "GitClone");
    expect(clones.length).toBe(1);
  });

  const pushCases: [string, "nobody" | "other" | "owner", unknown, number, string?][] = [
    ["no credentials", "nobody", { path: "app" }, 401],
    ["someone else's session", "other", { path: "app" }, 404],
    ["a path that is not a repository", "owner", { path: "src" }, 400, "path"],
    ["a bad branch name", "owner", { path: "app", branch: "-x" }, 400, "branch"],
    ["a remote branch named HEAD", "owner", { path: "app", remote_branch: "HEAD" }, 400, "remote_branch"],
    ["a full ref as the remote branch", "owner", { path: "app", remote_branch: "refs/tags/x" }, 400, "remote_branch"],
    ["a remote branch git refuses (.hidden)", "owner", { path: "app", remote_branch: "a/.hidden" }, 400, "remote_branch"],
    ["a branch that does not exist", "owner", { path: "app", branch: "nope" }, 400, "branch"],
    ["a missing path", "owner", {}, 400, "path"],
  ];
  for (const [what, who, body, status, field] of pushCases) {
    test(`push: ${what} → ${status}`, async () => {
      const headers = who === "nobody" ? {} : who === "other" ? other.bearer : user.bearer;
      const r = await api(t, "POST", `/v1/sessions/${sessionId}/git/push`, headers, body);
      expect(r.status, JSON.stringify(r.body)).toBe(status);
      if (field) expect(r.body.details.field).toBe(field);
    });
  }
});

/** A bare repository `<name>.git` served by the test server, holding a.txt and the symlinks `links` (path → target), made with git itself; its commit. */
function repoWithSymlinks(name: string, links: Record<string, string>): string {
  const work = join(srv.root, `${name}-work`);
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1", GIT_AUTHOR_NAME: "a", GIT_AUTHOR_EMAIL: "a@e.test", GIT_COMMITTER_NAME: "a", GIT_COMMITTER_EMAIL: "a@e.test" };
  const git = (...args: string[]) => {
    const r = Bun.spawnSync(["git", ...args], { env });
    expect(r.exitCode).toBe(0);
    return r.stdout.toString().trim();
  };
  git("init", "-q", "-b", "main", work);
  writeFileSync(join(work, "a.txt"), "hi\n");
  for (const [link, target] of Object.entries(links)) {
    mkdirSync(dirname(join(work, link)), { recursive: true });
    symlinkSync(target, join(work, link));
  }
  git("-C", work, "add", ".");
  git("-C", work, "commit", "-qm", name);
  git("clone", "-q", "--bare", work, join(srv.root, `${name}.git`));
  return git("-C", work, "rev-parse", "HEAD");
}

test("a repository whose symlink points beside its directory (still in /workspace) is cloned into a nested path", async () => {
  repoWithSymlinks("links", { "cfg.json": "../shared.json" });
  const id = await profile({ repositories: [{ url: `${srv.url}/links.git`, credential_secret: "GIT_TOKEN", path: "n1/sib" }] });
  mock.reset();
  mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "readlink /workspace/n1/sib/cfg.json && cat /workspace/n1/sib/a.txt && stat -c %u /workspace/n1/sib/a.txt" } }] }, { text: "ok" });
  const { task_id } = await submit(t, user, { profile_id: id, prompt: "look" });
  const task = await waitTask(t, user, task_id, undefined, 60_000);
  expect(task.status, JSON.stringify(task.error)).toBe("completed");
  const out = lastToolResults(mock.requests[1]!.body)[0]!.content as string;
  expect(out).toContain("../shared.json");
  expect(out).toContain("hi");
});

describe("symlinks that climb above /workspace (legal git content) are cloned as committed, inside the container only", () => {
  const links = { "tests/fixtures/up": "../../../outside", "escape-link": "../../../../../../etc/hostname", "abs-link": "/etc/passwd", "with space/l n": "../../../x y" };
  let sha: string;
  beforeAll(() => {
    sha = repoWithSymlinks("escape", links);
  });

  for (const [what, extra] of [
    ["the default branch", {}],
    ["a commit SHA", { ref: "sha" }],
  ] as const) {
    test(`${what}: cloned, each link reads as committed, git sees a clean tree, the links belong to the container's user`, async () => {
      const path = `deep/er/${what.replace(/\W/g, "")}`;
      const id = await profile({ repositories: [{ url: `${srv.url}/escape.git`, credential_secret: "GIT_TOKEN", path, ...("ref" in extra ? { ref: sha } : {}) }] });
      mock.reset();
      const show = Object.keys(links).map((l) => `readlink '/workspace/${path}/${l}'`).join(" && ");
      mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: `cd /workspace/${path} && ${show} && git status --porcelain && echo clean && git rev-parse HEAD && stat -c %u escape-link a.txt` } }] }, { text: "ok" });
      const { task_id } = await submit(t, user, { profile_id: id, prompt: "look" });
      const task = await waitTask(t, user, task_id, undefined, 60_000);
      expect(task.status, JSON.stringify(task.error)).toBe("completed");
      const out = lastToolResults(mock.requests[1]!.body)[0]!.content as string;
      const lines = out.trim().split("\n");
      expect(lines.slice(0, 4)).toEqual(Object.values(links));
      expect(lines[4]).toBe("clean");
      expect(lines[5]).toBe(sha);
      expect(lines[6]).toBe(lines[7]!);
    });
  }
});

test("a commit SHA in upper case names the same commit", async () => {
  const sha = (await srv.log("app")).split("\t")[0]!;
  const id = await profile({ repositories: [{ url: repoUrl, credential_secret: "GIT_TOKEN", path: "at-sha", ref: sha.toUpperCase() }] });
  mock.reset();
  mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "cd /workspace/at-sha && git rev-parse HEAD" } }] }, { text: "ok" });
  const { task_id } = await submit(t, user, { profile_id: id, prompt: "which commit" });
  const task = await waitTask(t, user, task_id, undefined, 60_000);
  expect(task.status, JSON.stringify(task.error)).toBe("completed");
  expect(lastToolResults(mock.requests[1]!.body)[0]!.content).toContain(sha);
});

test("a cancel during a clone: the GitClone step says it was cancelled (no host path, not git's last words), nothing is left behind", async () => {
  const url = await srv.createRepo("slow", { "a.txt": "hi\n" });
  srv.delay("slow", 20_000);
  const id = await profile({ repositories: [{ url, credential_secret: "GIT_TOKEN", path: "slow/app" }] });
  mock.reset();
  const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "look" });
  const started = () => sessionFrames(t, user, session_id).then((f) => f.some((x) => x.type === "task:tool_use" && x.tool === "GitClone"));
  for (let i = 0; i < 200 && !(await started()); i++) await Bun.sleep(100);
  // Until git asked the server (it is then waiting for the slow answer).
  for (let i = 0; i < 100 && !srv.requests.some((r) => r.path.startsWith("/slow.git/")); i++) await Bun.sleep(100);
  const at = performance.now();
  expect((await api(t, "POST", `/v1/tasks/${task_id}/cancel`, user.bearer)).status).toBe(202);
  expect((await waitTask(t, user, task_id)).status).toBe("cancelled");
  expect(performance.now() - at).toBeLessThan(10_000);
  const frames = await sessionFrames(t, user, session_id);
  const use = frames.find((f) => f.type === "task:tool_use" && f.tool === "GitClone");
  const result = frames.find((f) => f.type === "task:tool_result" && f.tool_use_id === use.tool_use_id);
  expect(result).toMatchObject({ output: "[cancelled by the user]", is_error: true });
  expect(JSON.stringify(frames)).not.toContain("runcell-git-");
  expect(mock.requests.length).toBe(0);
  const row = (await t.app.services.workspaces.forSession(session_id))!;
  expect(docker("exec", row.docker_id!, "sh", "-c", "ls -A /workspace").trim()).toBe("");
  srv.delay("slow", 0);
});

describe("failures and validation", () => {
  test("a wrong credential: a clear error, the task fails, nothing half-cloned is left", async () => {
    const id = await profile({ repositories: [{ url: repoUrl, credential_secret: "GIT_WRONG", path: "broken" }] });
    mock.reset();
    const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "hi" });
    const task = await waitTask(t, user, task_id);
    expect(task.status).toBe("failed");
    expect(task.error.code).toBe("BAD_GATEWAY");
    expect(task.error.message).toContain('authentication failed: the remote refused the credential in the vault secret "GIT_WRONG"');
    expect(mock.requests.length).toBe(0);
    const frames = await sessionFrames(t, user, session_id);
    expect(frames.find((f) => f.type === "task:tool_result" && f.tool === "GitClone")).toMatchObject({ is_error: true });
    const row = (await t.app.services.workspaces.forSession(session_id))!;
    expect(docker("exec", row.docker_id!, "sh", "-c", "ls -A /workspace").trim()).toBe("");
    expect(JSON.stringify(frames)).not.toContain("not-the-password");
  });

  test("a repository larger than the disk cap (workspace_disk_mb) is stopped on the server: a clear error, nothing copied", async () => {
    const big = await srv.createLargeRepo("big", 4 * 1024 * 1024);
    const id = await profile({ repositories: [{ url: big, credential_secret: "GIT_TOKEN", path: "big" }] });
    await t.app.services.runtimeConfig.patch({ policy: { workspace_disk_mb: 1 } });
    try {
      mock.reset();
      const { task_id } = await submit(t, user, { profile_id: id, prompt: "hi" });
      const task = await waitTask(t, user, task_id);
      expect(task.status).toBe("failed");
      expect(task.error.code).toBe("BAD_GATEWAY");
      expect(task.error.message).toContain("takes more than this server's disk cap of 1 MB per workspace (workspace_disk_mb)");
      expect(mock.requests.length).toBe(0);
      const row = (await t.app.services.workspaces.forSession(task.session_id))!;
      expect(docker("exec", row.docker_id!, "sh", "-c", "ls -A /workspace").trim()).toBe("");
    } finally {
      await t.app.services.runtimeConfig.patch({ policy: { workspace_disk_mb: 0 } });
    }
  });

  test("repositories for one session (POST /v1/tasks) are cloned besides the profile's; with session_id they are refused", async () => {
    const id = await profile({});
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "ls /workspace/mine" } }] }, { text: "ok" });
    const r = await submit(t, user, { profile_id: id, prompt: "hi", repositories: [{ url: repoUrl, credential_secret: "GIT_TOKEN", path: "mine", ref: "main" }] });
    expect((await waitTask(t, user, r.task_id)).status).toBe("completed");
    expect(lastToolResults(mock.requests[1]!.body)[0]!.content).toContain("README.md");
    const bad = await api(t, "POST", "/v1/tasks", user.bearer, { session_id: r.session_id, prompt: "x", repositories: [{ url: repoUrl }] });
    expect(bad.status).toBe(400);
    expect(bad.body.details.field).toBe("repositories");
  });

  const cases: [string, unknown, string][] = [
    ["credentials in the URL", [{ url: "https://user:tok@example.com/a.git" }], "repositories[0].url"],
    ["an unsupported scheme", [{ url: "ftp://example.com/a.git" }], "repositories[0].url"],
    ["plain http to a public host", [{ url: "http://example.com/a.git" }], "repositories[0].url"],
    ["a path outside /workspace", [{ url: "https://example.com/a.git", path: "../etc" }], "repositories[0].path"],
    ["two repositories at one path", [{ url: "https://example.com/a.git" }, { url: "https://example.com/b.git", path: "a" }], "repositories[1].path"],
    ["a bad ref", [{ url: "https://example.com/a.git", ref: "a b" }], "repositories[0].ref"],
    ["an unknown field", [{ url: "https://example.com/a.git", token: "x" }], "repositories[0].token"],
  ];
  for (const [what, repositories, field] of cases) {
    test(`profile: ${what} → 400 naming ${field}`, async () => {
      const r = await api(t, "POST", "/v1/profiles", user.bearer, { repositories });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.details.field).toBe(field);
    });
  }
});
