/**
 * Two replicas on one PostgreSQL database: a task submitted through replica B streams to a
 * client on replica A (B stores the frames and NOTIFYs; A reads them from the table), and when A
 * is killed with `kill -9` the client resumes on B after the last seq it saw — seqs contiguous
 * from 1, no duplicates, every stored frame received exactly once, in order.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockAnthropic } from "../../helpers/mock-anthropic.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { type ReplicaSet, startReplicas } from "../../helpers/replicas.ts";
import { WsClient } from "../../helpers/ws-client.ts";

const mock = startMockAnthropic();
afterAll(() => mock.stop());

const wsUrl = (url: string) => `${url.replace(/^http/, "ws")}/v1/stream`;

describe.skipIf(!PG_SERVER)("replicas: frames across servers", () => {
  let r: ReplicaSet;
  let profileId = "";
  beforeAll(async () => {
    r = await startReplicas(2);
    const res = await fetch(r.servers[1]!.url + "/v1/profiles", {
      method: "POST",
      headers: r.headers,
      body: JSON.stringify({ name: "fan", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest", network: "none" }),
    });
    profileId = (await res.json()).id;
    expect(profileId).toMatch(/^prof_/);
  });
  afterAll(() => r?.stop());

  async function storedEvents(url: string, sessionId: string): Promise<any[]> {
    const out: any[] = [];
    let after = 0;
    for (;;) {
      const page = await (await fetch(`${url}/v1/sessions/${sessionId}/events?after=${after}&limit=500`, { headers: r.headers })).json();
      out.push(...page.data);
      if (!page.next_cursor) return out;
      after = Number(page.next_cursor);
    }
  }

  const numbered = (frames: any[]) => frames.filter((f) => typeof f.seq === "number");

  test("a client on A sees the live frames of a task submitted through B; after kill -9 of A it resumes on B with contiguous seqs and no duplicates", async () => {
    const [a, b] = r.servers as [(typeof r.servers)[0], (typeof r.servers)[0]];
    mock.enqueue({ text: Array.from({ length: 1500 }, (_, i) => `w${i} `), delayMs: 2 });
    const sub = await (await fetch(b.url + "/v1/tasks", { method: "POST", headers: r.headers, body: JSON.stringify({ profile_id: profileId, prompt: "stream across" }) })).json();
    expect(sub.session_id).toMatch(/^sess_/);

    // On A, from the start: the replay of what B stored so far, then B's frames live.
    const onA = await WsClient.connect(wsUrl(a.url), { protocols: [`Bearer.${r.token}`] });
    onA.send({ type: "session.resume", session_id: sub.session_id, after: 0 });
    await onA.waitFor((f) => f.type === "session.replay_end", 15_000);
    const replayEnd = onA.frames.findIndex((f) => f.type === "session.replay_end");
    // Live frames arrive on A while B streams.
    await onA.waitFor((f) => f.type === "task:token" && f.seq > 300, 30_000, replayEnd + 1);
    const liveOnA = numbered(onA.frames.slice(replayEnd + 1));
    expect(liveOnA.length).toBeGreaterThan(50);

    // kill -9 A in the middle of the stream.
    expect(await a.kill("SIGKILL")).not.toBe(0);
    await onA.waitClose(5_000).catch(() => {});
    const seenOnA = numbered(onA.frames);
    const lastSeen = Math.max(...seenOnA.map((f) => f.seq));
    // What A sent was contiguous and in order.
    expect(seenOnA.map((f) => f.seq)).toEqual(seenOnA.map((_, i) => i + 1));

    // Resume on B after the last seq seen on A.
    const onB = await WsClient.connect(wsUrl(b.url), { protocols: [`Bearer.${r.token}`] });
    onB.send({ type: "session.resume", session_id: sub.session_id, after: lastSeen });
    await onB.waitFor((f) => f.type === "task:done" && f.task_id === sub.task_id, 60_000);
    const seenOnB = numbered(onB.frames);
    expect(seenOnB[0].seq).toBe(lastSeen + 1);

    const all = [...seenOnA, ...seenOnB];
    expect(all.map((f) => f.seq)).toEqual(all.map((_, i) => i + 1));
    // Exactly the stored frames, byte for byte.
    const stored = await storedEvents(b.url, sub.session_id);
    expect(all).toEqual(stored);
    expect(stored.at(-1)).toMatchObject({ type: "task:done", status: "completed" });
    const text = stored.filter((f) => f.type === "task:token").map((f) => f.text).join("");
    expect(text).toContain("w0 ");
    expect(text).toContain("w1499 ");
    onB.close();
    await r.restart(0);
  }, 120_000);

  test("both replicas write frames of one session (a turn through each): one sequence, no seq twice", async () => {
    const [a, b] = r.servers as [(typeof r.servers)[0], (typeof r.servers)[0]];
    mock.enqueue({ text: Array.from({ length: 200 }, (_, i) => `one${i} `) });
    const first = await (await fetch(a.url + "/v1/tasks", { method: "POST", headers: r.headers, body: JSON.stringify({ profile_id: profileId, prompt: "first" }) })).json();
    const watchA = await WsClient.connect(wsUrl(a.url), { protocols: [`Bearer.${r.token}`] });
    const watchB = await WsClient.connect(wsUrl(b.url), { protocols: [`Bearer.${r.token}`] });
    for (const w of [watchA, watchB]) w.send({ type: "session.resume", session_id: first.session_id, after: 0 });
    for (const w of [watchA, watchB]) await w.waitFor((f) => f.type === "task:done" && f.task_id === first.task_id, 30_000);
    mock.enqueue({ text: Array.from({ length: 200 }, (_, i) => `two${i} `) });
    const second = await (await fetch(b.url + "/v1/tasks", { method: "POST", headers: r.headers, body: JSON.stringify({ session_id: first.session_id, prompt: "second" }) })).json();
    for (const w of [watchA, watchB]) await w.waitFor((f) => f.type === "task:done" && f.task_id === second.task_id, 30_000);
    const stored = await storedEvents(a.url, first.session_id);
    expect(stored.map((f) => f.seq)).toEqual(stored.map((_, i) => i + 1));
    // Each socket got every stored frame once, in order — whichever replica wrote it.
    for (const w of [watchA, watchB]) expect(numbered(w.frames)).toEqual(stored);
    watchA.close();
    watchB.close();
  }, 90_000);
});
