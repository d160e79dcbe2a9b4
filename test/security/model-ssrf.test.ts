/**
 * Defect 1: SSRF through `model.base_url`. A normal user's profile may not point its model at
 * loopback, private, link-local or metadata addresses (checked at save, and again at every request
 * on the addresses resolved then, with the connection made to the checked address). Admins' profiles
 * and the hosts the operator lists (--allow-model-hosts) may; a model error from such a private
 * host never echoes what the server answered.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ModelNetwork } from "../../src/agents/model-network.ts";
import { classifyAddress } from "../../src/lib/ip.ts";
import { BlockedAddressError } from "../../src/lib/ssrf.ts";
import { createProfile, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let listed: TestApp;
let mock: MockProviderServer;
let user: TestUser;
let admin: TestUser;

const profileBody = (baseUrl: string) => ({
  name: "probe",
  system_prompt: "x",
  model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: baseUrl },
});

beforeAll(async () => {
  mock = startMockAnthropic();
  t = await startTestApp({ policy: "defaults" });
  listed = await startTestApp({ policy: "defaults", flags: ["--allow-model-hosts", "127.0.0.1"] });
  user = await createUser(t);
  admin = await createUser(t, { role: "admin" });
});
afterAll(async () => {
  await t.stop();
  await listed.stop();
  await mock.stop();
});

describe("a normal user's model.base_url is refused on non-public addresses", () => {
  const REFUSED: [string, string][] = [
    ["the Docker API on loopback", "http://127.0.0.1:2375/v1"],
    ["localhost by name", "http://localhost:8080/v1"],
    ["IPv6 loopback", "http://[::1]:11434/v1"],
    ["a cloud metadata address", "http://169.254.169.254/latest/meta-data/"],
    ["a private network", "http://10.1.2.3:8000/v1"],
    ["a private network (192.168/16)", "https://192.168.1.10/v1"],
    ["IPv4-mapped IPv6 loopback", "http://[::ffff:127.0.0.1]:2375/v1"],
    ["the unspecified address", "http://0.0.0.0:2375/v1"],
  ];
  for (const [what, url] of REFUSED) {
    test(`${what}: ${url} → 400 on model.base_url (create and update)`, async () => {
      const r = await api(t, "POST", "/v1/profiles", user.bearer, profileBody(url));
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.code).toBe("VALIDATION_FAILED");
      expect(r.body.details.field).toBe("model.base_url");
      expect(r.body.error).toContain("--allow-model-hosts");

      const ok = await api(t, "POST", "/v1/profiles", user.bearer, { name: "ok", system_prompt: "x", model: { provider: "anthropic", name: "claude-sonnet-4-6" } });
      expect(ok.status).toBe(201);
      const p = await api(t, "PATCH", `/v1/profiles/${ok.body.id}`, user.bearer, { model: { ...profileBody(url).model } });
      expect(p.status).toBe(400);
      expect(p.body.details.field).toBe("model.base_url");
      await api(t, "DELETE", `/v1/profiles/${ok.body.id}`, user.bearer);
    });
  }

  test("a public address is accepted", async () => {
    const r = await api(t, "POST", "/v1/profiles", user.bearer, profileBody("https://93.184.216.34/v1"));
    expect(r.status).toBe(201);
    await api(t, "DELETE", `/v1/profiles/${r.body.id}`, user.bearer);
  });
});

describe("admins and the operator's listed hosts may use a private model server; its errors are quiet", () => {
  test("an admin's profile on loopback runs, and a model error does not echo the server's answer", async () => {
    const profileId = await createProfile(t, admin, { mock });
    mock.reset();
    mock.enqueue({ text: "hello from a local model" });
    const { task_id } = await submit(t, admin, { profile_id: profileId, prompt: "hi" });
    expect((await waitTask(t, admin, task_id)).result_text).toBe("hello from a local model");

    mock.enqueue({ error: { status: 400, message: "INTERNAL-PAGE: root:x:0:0 /etc/passwd" } });
    const failed = await submit(t, admin, { profile_id: profileId, prompt: "hi" });
    const task = await waitTask(t, admin, failed.task_id);
    expect(task.status).toBe("failed");
    expect(task.error.code).toBe("MODEL_ERROR");
    expect(task.error.message).toContain("HTTP 400");
    expect(task.error.message).not.toContain("INTERNAL-PAGE");
  });

  test("a closed port on loopback fails without telling what was there", async () => {
    const profile = await api(t, "POST", "/v1/profiles", admin.bearer, { ...profileBody("http://127.0.0.1:9/v1"), image: t.config.workspaceImage });
    expect(profile.status).toBe(201);
    const { task_id } = await submit(t, admin, { profile_id: profile.body.id, prompt: "hi" });
    // The provider client retries a refused connection with backoff before giving up.
    const task = await waitTask(t, admin, task_id, undefined, 60_000);
    expect(task.error.code).toBe("MODEL_ERROR");
    expect(task.error.message).toContain("details are not shown");
    expect(task.error.message).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|connect/i);
  }, 70_000);

  test("--allow-model-hosts 127.0.0.1 lets a normal user's profile use it (quietly), and only that host", async () => {
    const u = await createUser(listed);
    const profileId = await createProfile(listed, u, { mock, limits: { max_concurrency: 1 } });
    mock.reset();
    mock.enqueue({ error: { status: 500, message: "INTERNAL-PAGE secret" } });
    const { task_id } = await submit(listed, u, { profile_id: profileId, prompt: "hi" });
    const task = await waitTask(listed, u, task_id, undefined, 60_000);
    expect(task.error.code).toBe("MODEL_ERROR");
    expect(task.error.message).not.toContain("INTERNAL-PAGE");
    const other = await api(listed, "POST", "/v1/profiles", u.bearer, profileBody("http://localhost:8080/v1"));
    expect(other.status).toBe(400);
  }, 70_000);
});

describe("the request-time check (DNS rebinding)", () => {
  test("a host that resolved publicly at save but resolves to loopback at request time is refused, and the connection goes to the checked address", async () => {
    let answer = "93.184.216.34";
    const net = { guard: true, resolve: async () => [{ address: answer, family: 4 as const }], classify: classifyAddress };
    const mn = new ModelNetwork({ allowHosts: [], isAdmin: () => false, net });
    await mn.check("u1", "https://rebind.example/v1");
    answer = "127.0.0.1";
    await expect(mn.check("u1", "https://rebind.example/v1")).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
    const route = await mn.route("u1", "https://rebind.example/v1");
    expect(route.fetch).toBeDefined();
    expect(route.quiet).toBe(false);
    await expect(route.fetch!("https://rebind.example/v1/messages", { method: "POST" })).rejects.toBeInstanceOf(BlockedAddressError);
  });
});
