/**
 * Replay and ordering on /v1/stream: resume mid-task under load with seq continuity, an
 * unanswered question answered after a reconnect, the interface's ordering invariants checked
 * over many scripted runs, and a reader that never reads closed (1013) while another keeps up.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockAnthropic, type MockProviderServer, type MockTurn } from "../helpers/mock-anthropic.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createUser, type TestUser } from "../helpers/users.ts";
import { createProfile, sessionFrames, waitTask } from "../helpers/agent.ts";
import { stalledReader, WsClient } from "../helpers/ws-client.ts";
import { waitFor } from "../helpers/net.ts";

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;
let profileId: string;
let stream: string;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  user = await createUser(t);
  // Free: the 20 MiB answer below would otherwise cost over the default $5 budget (its output is
  // counted from the text when the stream reports none) and end the task BUDGET_EXCEEDED.
  profileId = await createProfile(t, user, { mock, limits: { max_turns: 20 }, pricing: { input_per_mtok: 0, output_per_mtok: 0 } });
  stream = `${t.wsUrl}/v1/stream`;
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

const open = () => WsClient.connect(stream, { protocols: [`Bearer.${user.token}`] });

/** Replay framing, then frames with strictly increasing, gap-free seq, and no duplicate. */
function checkResume(frames: any[], after: number) {
  const start = frames.findIndex((f) => f.type === "session.replay_start");
  const end = frames.findIndex((f) => f.type === "session.replay_end");
  expect(start).toBeGreaterThanOrEqual(0);
  expect(end).toBeGreaterThan(start);
  const seqs = frames.filter((f) => typeof f.seq === "number").map((f) => f.seq);
  expect(seqs).toEqual(seqs.map((_, i) => after + 1 + i));
  // Live frames only after replay_end.
  const replayed = frames.slice(start + 1, end);
  expect(replayed.every((f) => f.seq <= frames[end].last_seq)).toBe(true);
  expect(frames.slice(end + 1).every((f) => f.seq > frames[end].last_seq)).toBe(true);
}

describe("resume", () => {
  test("resume mid-task under load: replay then live with no gap and no duplicate at the seam", async () => {
    mock.reset();
    mock.enqueue({ text: Array.from({ length: 1500 }, (_, i) => `w${i} `), delayMs: 1 });
    const a = await open();
    a.send({ type: "task.submit", profile_id: profileId, prompt: "stream a lot" });
    const first = await a.waitFor((f) => f.type === "task:token");
    const sid = first.session_id;
    // Resume from several points while tokens keep coming.
    const resumers: { c: WsClient; after: number }[] = [];
    for (const after of [0, 5, 200]) {
      await a.waitFor((f) => f.seq >= after + 20);
      const c = await open();
      c.send({ type: "session.resume", session_id: sid, after });
      resumers.push({ c, after });
    }
    // The first socket drops mid-task and resumes from the last seq it saw.
    a.close();
    const lastSeen = Math.max(...a.frames.map((f) => f.seq ?? 0));
    const again = await open();
    again.send({ type: "session.resume", session_id: sid, after: lastSeen });
    resumers.push({ c: again, after: lastSeen });

    for (const { c } of resumers) await c.waitFor((f) => f.type === "task:done", 60_000);
    const persisted = await sessionFrames(t, user, sid);
    for (const { c, after } of resumers) {
      checkResume(c.frames, after);
      const got = c.frames.filter((f) => typeof f.seq === "number");
      expect(got).toEqual(persisted.slice(after));
      c.close();
    }
    // The seam of the reconnected socket continues the one it dropped exactly.
    // (Frames in flight can still land on the first socket after close(); count what it had seen.)
    const firstSocket = a.frames.filter((f) => typeof f.seq === "number" && f.seq <= lastSeen);
    expect([...firstSocket, ...again.frames.filter((f) => typeof f.seq === "number")]).toEqual(persisted);
  }, 90_000);

  test("an `after` beyond the last stored seq replays nothing, reports the real last seq, and live frames follow", async () => {
    mock.reset();
    mock.enqueue({ text: "first" }, { text: "second" });
    const a = await open();
    a.send({ type: "task.submit", profile_id: profileId, prompt: "one" });
    const done = await a.waitFor((f) => f.type === "task:done");
    a.close();
    const stored = await sessionFrames(t, user, done.session_id);
    const last = stored.at(-1).seq;
    const b = await open();
    b.send({ type: "session.resume", session_id: done.session_id, after: last + 100_000 });
    const end = await b.waitFor((f) => f.type === "session.replay_end");
    expect(end.last_seq).toBe(last);
    b.send({ type: "session.turn", session_id: done.session_id, prompt: "two" });
    expect(await b.waitFor((f) => f.type === "turn.done")).toMatchObject({ result_text: "second" });
    const live = b.frames.filter((f) => typeof f.seq === "number");
    expect(live.length).toBeGreaterThan(0);
    expect(live.every((f) => f.seq > last)).toBe(true);
    b.close();
  });

  test("an unanswered question is part of the replay and can be answered after reconnecting", async () => {
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "AskUserQuestion", input: { questions: [{ question: "Deploy?", options: [{ label: "yes" }, { label: "no" }] }] } }] }, { text: "Deployed." });
    const a = await open();
    a.send({ type: "task.submit", profile_id: profileId, prompt: "ask" });
    const ask = await a.waitFor((f) => f.type === "task:ask_user");
    a.close();
    await Bun.sleep(100);
    const b = await open();
    b.send({ type: "session.resume", session_id: ask.session_id });
    const replayed = await b.waitFor((f) => f.type === "task:ask_user");
    expect(replayed).toEqual(ask);
    await b.waitFor((f) => f.type === "session.replay_end");
    b.send({ type: "task.answer", task_id: replayed.task_id, answer: "yes" });
    expect(await b.waitFor((f) => f.type === "turn.done")).toMatchObject({ result_text: "Deployed." });
    b.close();
  });
});

describe("ordering invariants over many scripted runs", () => {
  test("tokens before their turn.done; each tool_use has exactly one result or a task:failed; live after replay_end", async () => {
    mock.reset();
    let seed = 42;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const words = (n: number) => Array.from({ length: n }, (_, i) => `t${i} `);
    const runs = 24;
    const c = await open();
    c.send({ type: "session.start", profile_id: profileId });
    const ready = await c.waitFor((f) => f.type === "session.ready");
    for (let run = 0; run < runs; run++) {
      const turns: MockTurn[] = [];
      const steps = 1 + Math.floor(rand() * 3);
      for (let s = 0; s < steps; s++) {
        const tools = Array.from({ length: Math.floor(rand() * 3) }, (_, k) =>
          rand() < 0.2 ? { name: "Edit", input: { file_path: "missing.txt", old_string: "a", new_string: "b" } } : { name: "Bash", input: { command: `echo run${run}-${s}-${k}` } },
        );
        turns.push(rand() < 0.5 ? { text: words(1 + Math.floor(rand() * 6)), toolCalls: tools } : { blocks: [...tools.map((tool) => ({ tool })), { text: words(3) }] });
        if (tools.length === 0) break;
      }
      const last = turns[turns.length - 1] as { toolCalls?: unknown[]; blocks?: { tool?: unknown }[] };
      const endsWithTools = (last.toolCalls?.length ?? 0) > 0 || (last.blocks ?? []).some((b) => b.tool);
      if (rand() < 0.15) turns.push({ error: { status: 400, message: "bad request from the script" } });
      else if (endsWithTools) turns.push({ text: words(4) });
      mock.enqueue(...turns);
      const from = c.frames.length;
      c.send({ type: "session.turn", session_id: ready.session_id, prompt: `run ${run}` });
      await c.waitFor((f) => f.type === "task:done" || f.type === "task:failed", 30_000, from);
    }
    const frames = await sessionFrames(t, user, ready.session_id);
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
    const byTask = new Map<string, any[]>();
    for (const f of frames) if (f.task_id) byTask.set(f.task_id, [...(byTask.get(f.task_id) ?? []), f]);
    expect(byTask.size).toBe(runs);
    for (const [, fs] of byTask) {
      const end = fs.findIndex((f) => f.type === "task:done" || f.type === "task:failed");
      expect(end).toBe(fs.length - 1);
      const turnDone = fs.findIndex((f) => f.type === "turn.done");
      if (turnDone >= 0) {
        // 1. every token of the turn precedes turn.done; task:done fires alongside it.
        expect(fs.slice(turnDone + 1).some((f) => f.type === "task:token")).toBe(false);
        expect(fs[turnDone + 1].type).toBe("task:done");
      }
      // 2. every tool_use is followed by exactly one matching tool_result, or by task:failed.
      fs.forEach((f, i) => {
        if (f.type !== "task:tool_use") return;
        const later = fs.slice(i + 1);
        const results = later.filter((r) => r.type === "task:tool_result" && r.tool_use_id === f.tool_use_id);
        expect(results.length === 1 || (results.length === 0 && later.some((r) => r.type === "task:failed"))).toBe(true);
        if (results.length) expect(results[0].tool).toBe(f.tool);
      });
    }
    // The live socket saw exactly the persisted frames, in order.
    expect(c.frames.filter((f) => typeof f.seq === "number")).toEqual(frames);
    // 4. a resume frames the replay and sends nothing live before replay_end.
    const r = await open();
    r.send({ type: "session.resume", session_id: ready.session_id, after: 0 });
    await r.waitFor((f) => f.type === "session.replay_end", 30_000);
    checkResume(r.frames, 0);
    c.close();
    r.close();
  }, 180_000);
});

describe("backpressure", () => {
  test("a reader that never reads is closed with 1013; another socket keeps up and the agent is not slowed", async () => {
    mock.reset();
    const chunk = "x".repeat(64 * 1024);
    mock.enqueue({ text: Array.from({ length: 320 }, () => chunk), delayMs: 2 });
    const fast = await open();
    fast.send({ type: "session.start", profile_id: profileId });
    const ready = await fast.waitFor((f) => f.type === "session.ready");

    // A raw client that completes the handshake, subscribes, and then never reads again.
    const sock = await stalledReader(stream, user.token, ready.session_id, 1);

    const started = performance.now();
    fast.send({ type: "session.turn", session_id: ready.session_id, prompt: "flood" });
    const done = await fast.waitFor((f) => f.type === "task:done", 60_000);
    const elapsed = performance.now() - started;
    const tokens = fast.frames.filter((f) => f.type === "task:token" && f.task_id === done.task_id);
    expect(tokens.length).toBe(320);
    // The server gave up on the slow socket (it is closed from the server side with 1013).
    await waitFor(() => t.app.stream.size === 1, { timeoutMs: 10_000, what: "slow socket closed" });
    sock.resume();
    const rest = await new Promise<Buffer>((r) => {
      const parts: Buffer[] = [];
      sock.on("data", (d: Buffer) => parts.push(d));
      sock.on("end", () => r(Buffer.concat(parts)));
      sock.on("close", () => r(Buffer.concat(parts)));
    });
    // Somewhere in what it had buffered is the close frame: opcode 0x88 with status 1013.
    const closeAt = rest.lastIndexOf(Buffer.from([0x88]));
    expect(closeAt).toBeGreaterThanOrEqual(0);
    expect(rest.readUInt16BE(closeAt + 2)).toBe(1013);
    sock.destroy();
    expect(elapsed).toBeLessThan(30_000);
    fast.close();
    await waitTask(t, user, done.task_id);
  }, 120_000);
});
