/**
 * Defect 9: vault changes must reach running workspaces. Env values used to be sealed into the
 * container at creation (and reused on re-creation): a rotated or deleted secret kept flowing and
 * was no longer scrubbed. Now a profile's env is resolved at every exec (Docker exec `Env`), so
 * the next tool call in the same running container sees the new value, a deleted secret is gone
 * (the command is refused, naming the missing secret), `docker inspect` never shows a value, and
 * every value the task has seen (the rotated one included) is scrubbed from frames, the
 * transcript and what the model is sent. End to end: API → agent loop → mock model → Bash tool.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SCRUBBED } from "../../src/agents/scrub.ts";
import { createProfile, lastToolResults, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { type MockProviderServer, type RecordedRequest, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

const R = SCRUBBED;
const V1 = "v1-tok-8c2f61d0a9e4";
const V2 = "v2-tok-37be95a1c0f2";
const V3 = "v3-tok-d41d8cd98f00";
const V4 = "v4-tok-5e3a0b7c2d19";
const sha = (v: string) => new Bun.CryptoHasher("sha256").update(v).digest("hex");
/** Prints the value (to be scrubbed) and its hash (which proves what the command saw). */
const show = (label: string) => ({ name: "Bash", input: { command: `echo "${label}:$TOK"; printf %s "$TOK" | sha256sum` } });

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;
let profileId: string;

const putSecret = async (value: string) => expect((await api(t, "PUT", "/v1/secrets/TOK", user.bearer, { value })).status).toBe(204);

function inspect(dockerId: string): { raw: string; json: any } {
  const p = Bun.spawnSync(["docker", "inspect", dockerId], { stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode, p.stderr.toString()).toBe(0);
  const raw = p.stdout.toString();
  return { raw, json: JSON.parse(raw)[0] };
}

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  user = await createUser(t);
  await putSecret(V1);
  profileId = await createProfile(t, user, { mock, env: { TOK: { secret: "TOK" }, PLAIN: "visible" } });
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

describe("a secret in a profile's env is resolved at every exec", () => {
  test("rotated mid-task: the next tool call in the same container sees the new value; deleted: the next exec no longer gets it; nothing leaks", async () => {
    mock.reset();
    // The container as each tool call found it: [docker id, started at, inspect output].
    const seen: { id: string; startedAt: string; raw: string }[] = [];
    let sessionId = "";
    const container = async () => {
      const row = (await t.app.services.workspaces.forSession(sessionId))!;
      expect(row.status).toBe("running");
      const { raw, json } = inspect(row.docker_id!);
      expect(json.State.Running).toBe(true);
      seen.push({ id: json.Id, startedAt: json.State.StartedAt, raw });
    };
    mock.script(async (req: RecordedRequest) => {
      switch (req.index) {
        case 0:
          return { toolCalls: [show("A")] };
        case 1:
          // The first command ran with V1. Rotate while the task runs, between two tool calls.
          await container();
          await putSecret(V2);
          return { toolCalls: [show("B")] };
        case 2:
          await container();
          expect((await api(t, "DELETE", "/v1/secrets/TOK", user.bearer)).status).toBe(204);
          return { toolCalls: [{ name: "Bash", input: { command: 'echo "C:${TOK-unset}:$PLAIN"' } }] };
        case 3:
          await container();
          // The model repeats both values, split across deltas: both stay scrubbed (a value seen
          // during the task stays in the scrubber after its rotation or deletion).
          return { text: ["old ", V1.slice(0, 6), V1.slice(6), " new ", V2.slice(0, 9), V2.slice(9), " end"] };
        default:
          return { error: { status: 400, message: `unexpected request ${req.index}` } };
      }
    });

    const sub = await submit(t, user, { profile_id: profileId, prompt: "use the token" });
    sessionId = sub.session_id;
    const task = await waitTask(t, user, sub.task_id);
    expect(task.status, JSON.stringify(task)).toBe("completed");
    expect(mock.requests).toHaveLength(4);

    // The same container, never restarted, ran all three commands.
    expect(seen).toHaveLength(3);
    expect(new Set(seen.map((s) => s.id)).size).toBe(1);
    expect(new Set(seen.map((s) => s.startedAt)).size).toBe(1);

    // What each command saw (by hash), with the printed value scrubbed.
    const [a] = lastToolResults(mock.requests[1]!.body);
    expect(a!.is_error).toBeFalsy();
    expect(a!.content).toBe(`A:${R}\n${sha(V1)}  -\n[exit code: 0]`);
    const [b] = lastToolResults(mock.requests[2]!.body);
    expect(b!.is_error).toBeFalsy();
    expect(b!.content).toContain(sha(V2));
    expect(b!.content).not.toContain(sha(V1));
    // The rotated value is scrubbed although it was set after the model request that asked for it.
    expect(b!.content).toBe(`B:${R}\n${sha(V2)}  -\n[exit code: 0]`);
    // Deleted: the command does not run with a stale value; the result names the missing secret.
    const [c] = lastToolResults(mock.requests[3]!.body);
    expect(c!.is_error).toBe(true);
    expect(c!.content).toContain("env.TOK");
    expect(c!.content).toContain("not in your vault");
    expect(c!.content).not.toContain("C:");

    expect(task.result_text).toBe(`old ${R} new ${R} end`);

    // No value anywhere: the container's config (at every step), frames, transcript, the model's requests, logs.
    for (const s of seen) {
      for (const v of [V1, V2]) expect(s.raw).not.toContain(v);
      expect(s.raw).not.toContain("TOK=");
    }
    const frames = await sessionFrames(t, user, sessionId);
    const results = frames.filter((f) => f.type === "task:tool_result");
    expect(results).toHaveLength(3);
    expect(results[0].output).toContain(`A:${R}`);
    expect(results[1].output).toContain(`B:${R}`);
    const tokens = frames.filter((f) => f.type === "task:token").map((f) => f.text).join("");
    expect(tokens).toBe(`old ${R} new ${R} end`);
    const everywhere = [
      JSON.stringify(frames),
      JSON.stringify(await t.app.services.transcript.steps(sessionId)),
      JSON.stringify(mock.requests.map((r) => r.body)),
      t.logs.join("\n"),
    ];
    for (const text of everywhere) for (const v of [V1, V2]) expect(text).not.toContain(v);
  }, 60_000);

  test("set again between two tasks, the next task in the same session's running container sees it; docker inspect holds no value", async () => {
    mock.reset();
    await putSecret(V3);
    mock.enqueue({ text: "warm" });
    const first = await submit(t, user, { profile_id: profileId, prompt: "start" });
    expect((await waitTask(t, user, first.task_id)).status).toBe("completed");
    const row = (await t.app.services.workspaces.forSession(first.session_id))!;
    expect(row.status).toBe("running");
    const before = inspect(row.docker_id!).json;

    await putSecret(V4);
    mock.enqueue({ toolCalls: [show("D")] }, { text: "done" });
    const next = await submit(t, user, { session_id: first.session_id, prompt: "again" });
    expect((await waitTask(t, user, next.task_id)).status).toBe("completed");
    const [d] = lastToolResults(mock.requests[2]!.body);
    expect(d!.content).toBe(`D:${R}\n${sha(V4)}  -\n[exit code: 0]`);
    const after = inspect((await t.app.services.workspaces.forSession(first.session_id))!.docker_id!);
    expect(after.json.Id).toBe(before.Id);
    expect(after.json.State.StartedAt).toBe(before.State.StartedAt);
    for (const v of [V3, V4]) expect(after.raw).not.toContain(v);
    expect(JSON.stringify(after.json.Config.Env ?? [])).not.toContain("TOK");
    expect(JSON.stringify(await sessionFrames(t, user, first.session_id))).not.toContain(V4);
  }, 60_000);
});
