/**
 * POST /hooks/playbooks/<pb_id>/<secret>: the inbound trigger. The right secret starts a run (202
 * {task_id}); a wrong secret, an unknown playbook and a disabled one answer the very same 404;
 * rotation kills the old URL at once; the body is JSON of at most 64 KiB; triggers are
 * rate-limited per playbook; the secret never reaches the log.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createProfile, waitTask } from "../../helpers/agent.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { startMockAnthropic, type MockProviderServer } from "../../helpers/mock-anthropic.ts";
import { waitFor } from "../../helpers/net.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";

let t: TestApp;
let mock: MockProviderServer;
let alice: TestUser;
let profileId: string;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic().script(() => ({ text: "triggered" }));
  alice = await createUser(t);
  profileId = await createProfile(t, alice, { mock });
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

async function playbook(over: Record<string, unknown> = {}) {
  const r = await api(t, "POST", "/v1/playbooks", alice.bearer, { name: "hooked", profile_id: profileId, prompt: "Deploy happened.", ...over });
  expect(r.status).toBe(201);
  return r.body as { id: string; trigger_url: string };
}
const pathOf = (url: string) => new URL(url).pathname;
const trigger = (path: string, body?: unknown, headers: Record<string, string> = {}) => api(t, "POST", path, headers, body);

describe("the trigger URL", () => {
  test("the right secret starts a run: 202 {task_id}, a task triggered by hook, with the input", async () => {
    const pb = await playbook();
    const r = await trigger(pathOf(pb.trigger_url), { input: "commit abc123" });
    expect(r.status).toBe(202);
    expect(Object.keys(r.body)).toEqual(["task_id"]);
    const task = await waitTask(t, alice, r.body.task_id);
    expect(task).toMatchObject({ status: "completed", playbook_id: pb.id, trigger: "hook" });
    expect(task.prompt).toBe("Deploy happened.\n\n<run_input>\ncommit abc123\n</run_input>");
    const runs = (await api(t, "GET", `/v1/playbooks/${pb.id}/runs`, alice.bearer)).body.data;
    expect(runs[0]).toMatchObject({ task_id: r.body.task_id, trigger: "hook" });
  });

  test("no body, or an empty JSON object, is a run without input; no credential is needed", async () => {
    const pb = await playbook();
    const bare = await t.fetch(pathOf(pb.trigger_url), { method: "POST" });
    expect(bare.status).toBe(202);
    const empty = await trigger(pathOf(pb.trigger_url), {});
    expect(empty.status).toBe(202);
    for (const id of [((await bare.json()) as { task_id: string }).task_id, empty.body.task_id]) expect((await waitTask(t, alice, id)).prompt).toBe("Deploy happened.");
  });

  test("a browser that also holds someone's session cookie, posting from another site of the domain, is not refused: the secret is the credential", async () => {
    const pb = await playbook();
    const bob = await createUser(t);
    const r = await trigger(pathOf(pb.trigger_url), {}, { cookie: bob.cookie, origin: "https://status.example.com", "sec-fetch-site": "same-site" });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    // The same cookie on the API from that site is still refused.
    const api403 = await api(t, "POST", "/v1/profiles", { cookie: bob.cookie, "content-type": "application/json", origin: "https://status.example.com" }, { name: "x" });
    expect(api403.status).toBe(403);
    await waitTask(t, alice, r.body.task_id);
  });

  test("a wrong secret, an unknown playbook and a disabled playbook answer the same 404", async () => {
    const pb = await playbook();
    const secret = pathOf(pb.trigger_url).split("/").pop()!;
    const wrong = await trigger(`/hooks/playbooks/${pb.id}/${"A".repeat(43)}`);
    const unknown = await trigger(`/hooks/playbooks/pb_00000000000000000000000000/${secret}`);
    const off = await playbook({ enabled: false });
    const disabled = await trigger(pathOf(off.trigger_url));
    const truncated = await trigger(`/hooks/playbooks/${pb.id}/${secret.slice(0, -1)}`);
    for (const r of [wrong, unknown, disabled, truncated]) {
      expect(r.status).toBe(404);
      expect(r.body).toEqual(wrong.body);
    }
    expect(wrong.body).toEqual({ error: "Playbook not found", code: "NOT_FOUND" });
  });

  test("the secret comes before the body: a wrong secret, an unknown or a disabled playbook is the same 404 whatever the body", async () => {
    const pb = await playbook();
    const secret = pathOf(pb.trigger_url).split("/").pop()!;
    const off = await playbook({ enabled: false });
    const paths = [`/hooks/playbooks/${pb.id}/${"A".repeat(43)}`, `/hooks/playbooks/pb_00000000000000000000000000/${secret}`, "/hooks/playbooks/pb_nonexistent/whatever", pathOf(off.trigger_url)];
    const json = { "content-type": "application/json" };
    const bodies: [string, RequestInit][] = [
      ["an unknown field", { headers: json, body: '{"bogus":1}' }],
      ["text/plain", { headers: { "content-type": "text/plain" }, body: "hello" }],
      ["malformed JSON", { headers: json, body: "{" }],
      ["a compressed body", { headers: { ...json, "content-encoding": "gzip" }, body: "x" }],
      ["an oversized input", { headers: json, body: JSON.stringify({ input: "x".repeat(65 * 1024) }) }],
      ["JSON without a Content-Type", { body: "{}" }],
    ];
    for (const path of paths) {
      for (const [name, init] of bodies) {
        const r = await t.fetch(path, { method: "POST", ...init });
        expect(r.status, `${path}: ${name}`).toBe(404);
        expect(await r.json()).toEqual({ error: "Playbook not found", code: "NOT_FOUND" });
      }
    }
    expect((await api(t, "GET", `/v1/playbooks/${pb.id}/runs`, alice.bearer)).body.data).toEqual([]);
  });

  test("a path under /hooks/ that names no trigger route is a 404 whatever the body (no route: nothing is read)", async () => {
    const json = { "content-type": "application/json" };
    for (const [method, path] of [["POST", "/hooks/nothing"], ["POST", "/hooks/playbooks/pb_1"], ["POST", "/hooks/playbooks/pb_1/s/extra"], ["PUT", "/hooks/playbooks/pb_1/s"]] as const) {
      for (const init of [{ headers: json, body: "{" }, { headers: json, body: "x".repeat(2 * 1024 * 1024) }, { headers: { "content-type": "text/plain" }, body: "hello" }] as RequestInit[]) {
        const r = await t.fetch(path, { method, ...init });
        expect(r.status, `${method} ${path}`).toBe(404);
        expect((await r.json()).code).toBe("NOT_FOUND");
      }
    }
  });

  test("a path that does not decode (%ff, %zz, a lone surrogate) is a 404 too, never a 500", async () => {
    const pb = await playbook();
    const secret = pathOf(pb.trigger_url).split("/").pop()!;
    for (const path of [`/hooks/playbooks/${pb.id}/%ff`, `/hooks/playbooks/${pb.id}/%zz`, `/hooks/playbooks/%ed%a0%80/${secret}`, `/hooks/playbooks/${pb.id}/${secret}%`]) {
      const r = await trigger(path, {});
      expect(r.status, path).toBe(404);
      expect(r.body.code).toBe("NOT_FOUND");
    }
    expect(t.logs.some((l) => l.includes('"level":"error"'))).toBe(false);
  });

  test("after rotation the old URL is 404 at once and the new one works", async () => {
    const pb = await playbook();
    const rotated = await api(t, "POST", `/v1/playbooks/${pb.id}/rotate-trigger`, alice.bearer);
    expect(rotated.status).toBe(200);
    expect(rotated.body.trigger_url).not.toBe(pb.trigger_url);
    expect((await trigger(pathOf(pb.trigger_url))).status).toBe(404);
    const ok = await trigger(pathOf(rotated.body.trigger_url));
    expect(ok.status).toBe(202);
    await waitTask(t, alice, ok.body.task_id);
  });

  test("bad bodies: over 1 MiB → 413, not JSON, unknown field and an input over 64 KiB → 400; none starts a run", async () => {
    const pb = await playbook();
    const path = pathOf(pb.trigger_url);
    const big = await trigger(path, { input: "x".repeat(1024 * 1024) });
    expect([big.status, big.body.code, big.body.details.field]).toEqual([413, "VALIDATION_FAILED", "body"]);
    const long = await trigger(path, { input: "x".repeat(64 * 1024 + 1) });
    expect([long.status, long.body.code, long.body.details.field]).toEqual([400, "VALIDATION_FAILED", "input"]);
    const form = await t.fetch(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "input=x" });
    expect(form.status).toBe(400);
    const unknown = await trigger(path, { inputs: "x" });
    expect([unknown.status, unknown.body.details.field]).toEqual([400, "inputs"]);
    expect((await api(t, "GET", `/v1/playbooks/${pb.id}/runs`, alice.bearer)).body.data).toEqual([]);
  });

  test("the secret never reaches the log (the access log shows the path with it redacted)", async () => {
    const pb = await playbook();
    const secret = pathOf(pb.trigger_url).split("/").pop()!;
    await trigger(pathOf(pb.trigger_url));
    await trigger(`/hooks/playbooks/${pb.id}/${secret}/extra`);
    const logs = t.logs.join("\n");
    expect(logs).toContain(`/hooks/playbooks/${pb.id}/[redacted]`);
    expect(logs).not.toContain(secret);
  });
});

describe("rate limit per playbook", () => {
  let small: TestApp;
  let bob: TestUser;
  beforeAll(async () => {
    small = await startTestApp({ flags: ["--rate-limit-per-minute", "6", "--rate-limit-burst", "3", "--trust-proxy"] });
    bob = await createUser(small);
  });
  afterAll(() => small.stop());

  test("from many addresses, the 4th trigger of one playbook is 429 with Retry-After; another playbook is unaffected", async () => {
    const profile = await createProfile(small, bob, { mock });
    const make = async () => (await api(small, "POST", "/v1/playbooks", { ...bob.bearer, "x-forwarded-for": "10.9.9.9" }, { name: "p", profile_id: profile, prompt: "p", enabled: true })).body;
    const [one, two] = [await make(), await make()];
    const hit = (pb: { trigger_url: string }, i: number) => api(small, "POST", pathOf(pb.trigger_url), { "x-forwarded-for": `10.0.0.${i}` });
    const answers = [];
    for (let i = 1; i <= 4; i++) answers.push(await hit(one, i));
    expect(answers.map((r) => r.status)).toEqual([202, 202, 202, 429]);
    // Each caller's address is new (3 of 3 left after the take): the 202s report the playbook's bucket, nearer to refusing.
    expect(answers.slice(0, 3).map((r) => r.headers.get("ratelimit-remaining"))).toEqual(["2", "1", "0"]);
    expect(answers[3]!.body.code).toBe("RATE_LIMITED");
    expect(Number(answers[3]!.headers.get("retry-after"))).toBeGreaterThan(0);
    // The headers report the bucket that refused (the playbook's, empty), not the new address's (2 of 3 left).
    expect([answers[3]!.headers.get("ratelimit-limit"), answers[3]!.headers.get("ratelimit-remaining")]).toEqual(["3", "0"]);
    expect((await hit(two, 50)).status).toBe(202);
    // (Through the service: bob's own REST calls would spend his small bucket.)
    for (const r of answers.slice(0, 3)) await waitFor(async () => ["completed", "failed"].includes((await small.app.services.tasks.byId(r.body.task_id))!.status), { what: "run settled" });
  });

  test("wrong secrets do not spend the playbook's bucket: after many from one address, the real URL from another is 202", async () => {
    // (A user of its own: bob's small bucket is spent by the test above.)
    const carol = await createUser(small);
    const profile = await createProfile(small, carol, { mock });
    const pb = (await api(small, "POST", "/v1/playbooks", { ...carol.bearer, "x-forwarded-for": "10.9.9.8" }, { name: "p", profile_id: profile, prompt: "p" })).body as { id: string; trigger_url: string };
    const wrong = [];
    for (let i = 0; i < 5; i++) wrong.push((await api(small, "POST", `/hooks/playbooks/${pb.id}/${"A".repeat(43)}`, { "x-forwarded-for": "10.7.7.7" })).status);
    // The address's own bucket (burst 3) refuses it after three tries; none of them touched the playbook's.
    expect(wrong).toEqual([404, 404, 404, 429, 429]);
    const real = await api(small, "POST", pathOf(pb.trigger_url), { "x-forwarded-for": "10.7.7.8" });
    expect(real.status).toBe(202);
    await waitFor(async () => ["completed", "failed"].includes((await small.app.services.tasks.byId(real.body.task_id))!.status), { what: "run settled" });
  });
});

