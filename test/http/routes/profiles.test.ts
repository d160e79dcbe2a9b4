/**
 * /v1/profiles on a real app: the route scenario table (credentials, someone else's profile, every
 * validated field on POST and PATCH, success), defaults, PATCH semantics, pagination, and the
 * service interface the runtime calls (get / toApi).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DEFAULT_SYSTEM_PROMPT } from "../../../src/agents/profile-rules.ts";
import { TOOL_NAMES } from "../../../src/schema/profile.ts";
import { AppError } from "../../../src/lib/errors.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { sqlRun } from "../../helpers/db.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
let bobProfile: string;

beforeAll(async () => {
  t = await startTestApp();
  [alice, bob] = await Promise.all([createUser(t), createUser(t)]);
  bobProfile = (await api(t, "POST", "/v1/profiles", bob.bearer, { name: "bob's" })).body.id;
  a = await actors(t);
});
afterAll(() => t.stop());

const create = (body: unknown, who: TestUser = alice) => api(t, "POST", "/v1/profiles", who.bearer, body);

/** Bad profile bodies and the field each one names (POST and PATCH both refuse them). */
const cases: [string, unknown, string][] = [
  ["body not an object", [1], "body"],
  ["unknown field", { nme: "x" }, "nme"],
  ["name not a string", { name: 5 }, "name"],
  ["name empty", { name: "   " }, "name"],
  ["name too long", { name: "x".repeat(101) }, "name"],
  ["name with a control character", { name: "a\nb" }, "name"],
  ["name with a bidi isolate", { name: "a\u2066b" }, "name"],
  ["name with an invisible tag character", { name: "a\u{E0001}b" }, "name"],
  ["name null", { name: null }, "name"],
  ["system_prompt empty", { system_prompt: " \n" }, "system_prompt"],
  ["system_prompt too long", { system_prompt: "x".repeat(100_001) }, "system_prompt"],
  ["model not an object", { model: "claude" }, "model"],
  ["model without provider", { model: { name: "gpt-4o" } }, "model.provider"],
  ["unknown provider", { model: { provider: "gemini" } }, "model.provider"],
  ["unknown model field", { model: { provider: "openai", temperature: 1 } }, "model.temperature"],
  ["model name with a space", { model: { provider: "openai", name: "gpt 4" } }, "model.name"],
  ["model name not a string", { model: { provider: "openai", name: 4 } }, "model.name"],
  ["base_url not a URL", { model: { provider: "openai", base_url: "localhost:11434" } }, "model.base_url"],
  ["base_url not http(s)", { model: { provider: "openai", base_url: "ftp://example.com/v1" } }, "model.base_url"],
  ["base_url with credentials", { model: { provider: "openai", base_url: "https://user:pw@example.com/v1" } }, "model.base_url"],
  ["base_url with a query", { model: { provider: "openai", base_url: "https://example.com/v1?key=1" } }, "model.base_url"],
  ["base_url on demo", { model: { provider: "demo", base_url: "https://example.com" } }, "model.base_url"],
  ["api_key_secret malformed", { model: { provider: "anthropic", api_key_secret: "my-key" } }, "model.api_key_secret"],
  ["api_key_secret on demo", { model: { provider: "demo", api_key_secret: "K" } }, "model.api_key_secret"],
  ["pricing not an object", { model: { provider: "openai", pricing: 3 } }, "model.pricing"],
  ["pricing negative", { model: { provider: "openai", pricing: { input_per_mtok: -1, output_per_mtok: 1 } } }, "model.pricing.input_per_mtok"],
  ["pricing incomplete", { model: { provider: "openai", pricing: { input_per_mtok: 1 } } }, "model.pricing.output_per_mtok"],
  ["pricing not a number", { model: { provider: "openai", pricing: { input_per_mtok: 1, output_per_mtok: "2" } } }, "model.pricing.output_per_mtok"],
  ["pricing unknown field", { model: { provider: "openai", pricing: { input_per_mtok: 1, output_per_mtok: 1, cached: 0 } } }, "model.pricing.cached"],
  ["image uppercase", { image: "Ubuntu:22.04" }, "image"],
  ["image with a space", { image: "debian bookworm" }, "image"],
  ["image empty tag", { image: "debian:" }, "image"],
  ["image bad digest", { image: "debian@sha256:abc" }, "image"],
  ["image too long", { image: "a/".repeat(300) + "b" }, "image"],
  ["tools not an array", { tools: "Bash" }, "tools"],
  ["unknown tool", { tools: ["Bash", "Read", "Browse"] }, "tools[2]"],
  ["tool not a string", { tools: [7] }, "tools[0]"],
  ["duplicate tool", { tools: ["Bash", "Bash"] }, "tools[1]"],
  ["env not an object", { env: ["A=1"] }, "env"],
  ["env name starting with a digit", { env: { "1FOO": "x" } }, "env.1FOO"],
  ["env name with a dash", { env: { "MY-VAR": "x" } }, "env.MY-VAR"],
  ["env name reserved (prefix)", { env: { RUNCELL_SESSION: "x" } }, "env.RUNCELL_SESSION"],
  ["env name reserved (exact)", { env: { HOSTNAME: "x" } }, "env.HOSTNAME"],
  ["env value a number", { env: { PORT: 8080 } }, "env.PORT"],
  ["env value with NUL", { env: { A: "a\u0000b" } }, "env.A"],
  ["env value too long", { env: { A: "x".repeat(32 * 1024 + 1) } }, "env.A"],
  ["env secret ref malformed", { env: { TOKEN: { secret: "not valid" } } }, "env.TOKEN"],
  ["env secret ref with extra key", { env: { TOKEN: { secret: "T", default: "x" } } }, "env.TOKEN"],
  ["env too many", { env: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`V${i}`, "x"])) }, "env"],
  ["limits not an object", { limits: 5 }, "limits"],
  ["unknown limit", { limits: { max_tokens: 5 } }, "limits.max_tokens"],
  ["max_turns zero", { limits: { max_turns: 0 } }, "limits.max_turns"],
  ["max_turns fractional", { limits: { max_turns: 2.5 } }, "limits.max_turns"],
  ["max_turns too high", { limits: { max_turns: 1001 } }, "limits.max_turns"],
  ["max_budget_usd zero", { limits: { max_budget_usd: 0 } }, "limits.max_budget_usd"],
  ["max_budget_usd a string", { limits: { max_budget_usd: "5" } }, "limits.max_budget_usd"],
  ["max_concurrency too high", { limits: { max_concurrency: 1001 } }, "limits.max_concurrency"],
  ["memory_mb too low", { limits: { memory_mb: 16 } }, "limits.memory_mb"],
  ["cpus too low", { limits: { cpus: 0.01 } }, "limits.cpus"],
  ["cpus too high", { limits: { cpus: 65 } }, "limits.cpus"],
  ["pids too high", { limits: { pids: 100_000 } }, "limits.pids"],
  ["network unknown", { network: "host" }, "network"],
  ["host_labels not an array", { host_labels: "gpu" }, "host_labels"],
  ["host label empty", { host_labels: [""] }, "host_labels[0]"],
  ["host label with a comma", { host_labels: ["gpu,ssd"] }, "host_labels[0]"],
  ["host label with a space", { host_labels: ["region = eu"] }, "host_labels[0]"],
  ["host label twice", { host_labels: ["gpu", "gpu"] }, "host_labels[1]"],
  ["host labels too many", { host_labels: Array.from({ length: 21 }, (_, i) => `l${i}`) }, "host_labels"],
];

const bad = cases.map(([name, body, field]) => ({ name, body, field }));
let a: Actors;

/** A profile of `user`, made through the API. */
const profileOf = async (_a: Actors, user: TestUser) => (await api(t, "POST", "/v1/profiles", user.bearer, { name: "table" })).body.id as string;

routeTable("/v1/profiles", () => a, [
  { route: "POST /v1/profiles", body: () => ({ name: "made by the table" }), invalid: bad, success: 201, check: (r) => expect(r.body.name).toBe("made by the table") },
  { route: "GET /v1/profiles", query: "limit=5", invalid: [{ name: "limit=0", query: "limit=0", field: "limit" }], success: 200, viaCookie: true },
  { route: "GET /v1/profiles/:id", record: profileOf, success: 200, check: (r, _a, id) => expect(r.body.id).toBe(id) },
  {
    route: "PATCH /v1/profiles/:id",
    record: profileOf,
    body: () => ({ name: "renamed" }),
    invalid: bad.filter((c) => !c.name.startsWith("model without")),
    success: 200,
    check: (r) => expect(r.body.name).toBe("renamed"),
  },
  { route: "DELETE /v1/profiles/:id", record: profileOf, success: 204 },
]);

describe("credentials and ownership", () => {
  test("an anonymous request with an invalid body is still 401, not 400", async () => {
    const r = await api(t, "POST", "/v1/profiles", {}, { tools: ["Nope"] });
    expect(r.status).toBe(401);
  });

  test("someone else's profile is untouched by the table's attempts", async () => {
    const still = await api(t, "GET", `/v1/profiles/${bobProfile}`, bob.bearer);
    expect(still.status).toBe(200);
    expect(still.body.name).toBe("bob's");
  });

  test("a PATCH with an invalid body on someone else's profile is 404 (existence is not revealed)", async () => {
    const r = await api(t, "PATCH", `/v1/profiles/${bobProfile}`, alice.bearer, { tools: ["Nope"] });
    expect(r.status).toBe(404);
  });

  test("someone else's profile never appears in the list", async () => {
    const r = await api(t, "GET", "/v1/profiles?limit=100", alice.bearer);
    expect(r.status).toBe(200);
    expect(r.body.data.map((p: { id: string }) => p.id)).not.toContain(bobProfile);
  });

  test("the cookie session works like a token", async () => {
    const r = await api(t, "POST", "/v1/profiles", alice.session, { name: "via cookie" });
    expect(r.status).toBe(201);
    expect((await api(t, "GET", `/v1/profiles/${r.body.id}`, alice.session)).status).toBe(200);
  });
});

describe("defaults", () => {
  test("an empty body makes a complete profile with every default", async () => {
    const r = await create({});
    expect(r.status).toBe(201);
    expect(r.body.id).toMatch(/^prof_[0-9a-z]{26}$/);
    expect(r.body).toMatchObject({
      name: "Default",
      system_prompt: DEFAULT_SYSTEM_PROMPT,
      model: { provider: "demo", name: "demo" },
      image: t.config.workspaceImage,
      tools: [...TOOL_NAMES],
      env: {},
      limits: { max_turns: 50, max_budget_usd: 5, max_concurrency: 5, memory_mb: 2048, cpus: 1, pids: 1024 },
      network: "none",
    });
    expect(Object.keys(r.body.model).sort()).toEqual(["name", "provider"]);
    expect(r.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(r.body.updated_at).toBe(r.body.created_at);
    expect(r.body.system_prompt).toContain("/workspace");
  });

  test.each([
    [{ ANTHROPIC_API_KEY: "sk-ant-x", OPENAI_API_KEY: "sk-x" }, { provider: "anthropic", name: "claude-sonnet-4-6" }],
    [{ OPENAI_API_KEY: "sk-x" }, { provider: "openai", name: "gpt-4.1" }],
    [{}, { provider: "demo", name: "demo" }],
  ])("the default model follows the server's keys (%p)", async (env, model) => {
    const saved = { a: process.env.ANTHROPIC_API_KEY, o: process.env.OPENAI_API_KEY };
    Object.assign(process.env, env);
    try {
      const r = await create({});
      expect(r.body.model).toEqual(model);
    } finally {
      for (const [k, v] of [["ANTHROPIC_API_KEY", saved.a], ["OPENAI_API_KEY", saved.o]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  test("a provider without a name gets that provider's default name", async () => {
    expect((await create({ model: { provider: "anthropic" } })).body.model).toEqual({ provider: "anthropic", name: "claude-sonnet-4-6" });
    expect((await create({ model: { provider: "openai", name: null } })).body.model).toEqual({ provider: "openai", name: "gpt-4.1" });
  });

  test("max_concurrency follows the operator's default at creation time, and stays", async () => {
    const before = t.config.defaultMaxConcurrency;
    t.config.defaultMaxConcurrency = 9; // what PATCH /admin/config does
    try {
      const r = await create({ limits: { max_turns: 3 } });
      expect(r.body.limits).toMatchObject({ max_turns: 3, max_concurrency: 9, max_budget_usd: 5 });
      t.config.defaultMaxConcurrency = 2;
      expect((await api(t, "GET", `/v1/profiles/${r.body.id}`, alice.bearer)).body.limits.max_concurrency).toBe(9);
    } finally {
      t.config.defaultMaxConcurrency = before;
    }
  });

  test("a complete profile is stored exactly as given", async () => {
    const body = {
      name: "  Researcher  ",
      system_prompt: "Be brief.",
      model: { provider: "openai", name: "llama3.1:8b", base_url: "http://127.0.0.1:11434/v1", api_key_secret: "OLLAMA_KEY", pricing: { input_per_mtok: 0.5, output_per_mtok: 1.5 } },
      image: "registry.example.com:5000/team/agent:1.2@sha256:" + "ab".repeat(32),
      tools: ["Read", "Bash"],
      env: { LOG_LEVEL: "debug", EMPTY: "", GITHUB_TOKEN: { secret: "GH_TOKEN" } },
      limits: { max_turns: 1000, max_budget_usd: 0.01, max_concurrency: 1, memory_mb: 64, cpus: 0.5, pids: 32 },
      network: "bridge",
    };
    const r = await create(body);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ ...body, name: "Researcher" });
    const got = await api(t, "GET", `/v1/profiles/${r.body.id}`, alice.bearer);
    expect(got.body).toEqual(r.body);
  });
});

describe("validation", () => {
  test("a refused PATCH stores nothing", async () => {
    const patchTarget = (await create({ name: "patch target" })).body.id;
    for (const [name, body] of cases.filter(([n]) => !n.startsWith("model without"))) {
      expect((await api(t, "PATCH", `/v1/profiles/${patchTarget}`, alice.bearer, body)).status, name).toBe(400);
    }
    const r = await api(t, "GET", `/v1/profiles/${patchTarget}`, alice.bearer);
    expect(r.body.name).toBe("patch target");
    expect(r.body.updated_at).toBe(r.body.created_at);
  });

  test("a bad list query → 400", async () => {
    expect((await api(t, "GET", "/v1/profiles?limit=0", alice.bearer)).body.details.field).toBe("limit");
  });
});

describe("PATCH semantics", () => {
  const base = {
    name: "p",
    model: { provider: "openai", name: "gpt-4o", base_url: "https://llm.example.com/v1", api_key_secret: "K", pricing: { input_per_mtok: 1, output_per_mtok: 2 } },
    tools: ["Bash", "Read"],
    env: { A: "1", B: { secret: "S" } },
    limits: { max_turns: 10, max_budget_usd: 2 },
    network: "bridge",
  };
  const patch = async (body: unknown) => {
    const id = (await create(base)).body.id;
    const r = await api(t, "PATCH", `/v1/profiles/${id}`, alice.bearer, body);
    expect(r.status).toBe(200);
    expect((await api(t, "GET", `/v1/profiles/${id}`, alice.bearer)).body).toEqual(r.body);
    return r.body;
  };

  test("top-level fields replace; others are kept", async () => {
    const p = await patch({ name: "renamed", system_prompt: "New prompt", image: "debian:bookworm" });
    expect(p).toMatchObject({ name: "renamed", system_prompt: "New prompt", image: "debian:bookworm", network: "bridge", tools: ["Bash", "Read"] });
    expect(p.updated_at >= p.created_at).toBe(true);
  });

  test("env and tools replace as a whole", async () => {
    const p = await patch({ env: { C: "3" }, tools: ["Edit"] });
    expect(p.env).toEqual({ C: "3" });
    expect(p.tools).toEqual(["Edit"]);
    expect((await patch({ env: {}, tools: [] })).env).toEqual({});
  });

  test("limits merge shallowly", async () => {
    const p = await patch({ limits: { max_turns: 20 } });
    expect(p.limits).toEqual({ max_turns: 20, max_budget_usd: 2, max_concurrency: 5, memory_mb: 2048, cpus: 1, pids: 1024 });
  });

  test("a null limit is refused", async () => {
    const id = (await create(base)).body.id;
    const r = await api(t, "PATCH", `/v1/profiles/${id}`, alice.bearer, { limits: { pids: null } });
    expect(r.status).toBe(400);
    expect(r.body.details.field).toBe("limits.pids");
  });

  test("model merges shallowly while the provider stays", async () => {
    const p = await patch({ model: { name: "gpt-4.1-mini" } });
    expect(p.model).toEqual({ ...base.model, name: "gpt-4.1-mini" });
    const same = await patch({ model: { provider: "openai", pricing: { input_per_mtok: 0, output_per_mtok: 0 } } });
    expect(same.model).toEqual({ ...base.model, pricing: { input_per_mtok: 0, output_per_mtok: 0 } });
  });

  test("null removes optional model fields and resets the name", async () => {
    const p = await patch({ model: { base_url: null, api_key_secret: null, pricing: null, name: null } });
    expect(p.model).toEqual({ provider: "openai", name: "gpt-4.1" });
  });

  test("changing the provider starts the model over", async () => {
    expect((await patch({ model: { provider: "demo" } })).model).toEqual({ provider: "demo", name: "demo" });
    expect((await patch({ model: { provider: "anthropic", name: "claude-opus-4-1" } })).model).toEqual({ provider: "anthropic", name: "claude-opus-4-1" });
  });

  test("network can be changed without touching anything else", async () => {
    const p = await patch({ network: "none" });
    expect(p.network).toBe("none");
    expect(p.env).toEqual(base.env);
  });

  test("host_labels: empty by default, kept as given, replaced by a PATCH", async () => {
    const created = (await create(base)).body;
    expect(created.host_labels).toEqual([]);
    const labelled = await api(t, "PATCH", `/v1/profiles/${created.id}`, alice.bearer, { host_labels: ["gpu", "region=eu"] });
    expect(labelled.status).toBe(200);
    expect(labelled.body.host_labels).toEqual(["gpu", "region=eu"]);
    expect((await api(t, "GET", `/v1/profiles/${created.id}`, alice.bearer)).body.host_labels).toEqual(["gpu", "region=eu"]);
    expect((await api(t, "PATCH", `/v1/profiles/${created.id}`, alice.bearer, { host_labels: [] })).body.host_labels).toEqual([]);
  });

  test("an empty PATCH changes nothing, not even updated_at", async () => {
    const created = (await create(base)).body;
    await Bun.sleep(3);
    const r = await api(t, "PATCH", `/v1/profiles/${created.id}`, alice.bearer, {});
    expect(r.status).toBe(200);
    expect(r.body).toEqual(created);
  });

  test("a real change moves updated_at", async () => {
    const created = (await create(base)).body;
    await Bun.sleep(3);
    const r = await api(t, "PATCH", `/v1/profiles/${created.id}`, alice.bearer, { name: "changed" });
    expect(r.body.updated_at > created.updated_at).toBe(true);
    expect(r.body.created_at).toBe(created.created_at);
  });

  test("id and timestamps cannot be patched", async () => {
    const id = (await create(base)).body.id;
    for (const body of [{ id: "prof_x" }, { created_at: "2020-01-01T00:00:00.000Z" }]) {
      const r = await api(t, "PATCH", `/v1/profiles/${id}`, alice.bearer, body);
      expect(r.status).toBe(400);
      expect(r.body.details.field).toBe(Object.keys(body)[0]!);
    }
  });
});

describe("the read routes' stored JSON (src/lib/versioned-json.ts)", () => {
  test("GET answers the records toApi makes, and every change shows at once — also several within one millisecond", async () => {
    // A clock that does not move: updated_at must still rise with each change (it keys the stored JSON).
    const frozen = await startTestApp({ now: () => Date.parse("2026-01-01T00:00:00.000Z") });
    try {
      const u = await createUser(frozen);
      const id = (await api(frozen, "POST", "/v1/profiles", u.bearer, { name: "v0" })).body.id;
      const versions = new Set<string>();
      for (let i = 1; i <= 5; i++) {
        expect((await api(frozen, "GET", `/v1/profiles/${id}`, u.bearer)).body.name).toBe(`v${i - 1}`);
        const patched = await api(frozen, "PATCH", `/v1/profiles/${id}`, u.bearer, { name: `v${i}`, tools: i % 2 ? ["Bash"] : ["Read", "Write"] });
        versions.add(patched.body.updated_at);
        const one = await api(frozen, "GET", `/v1/profiles/${id}`, u.bearer);
        const list = await api(frozen, "GET", "/v1/profiles", u.bearer);
        expect(one.body).toEqual(patched.body);
        expect(list.body.data).toEqual([patched.body]);
        const p = frozen.app.services.profiles;
        expect(one.body).toEqual(JSON.parse(JSON.stringify(p.toApi(await p.get(u.id, id)))));
        expect(one.headers.get("content-type")).toBe("application/json; charset=utf-8");
      }
      expect(versions.size).toBe(5);
      await api(frozen, "DELETE", `/v1/profiles/${id}`, u.bearer);
      expect((await api(frozen, "GET", `/v1/profiles/${id}`, u.bearer)).status).toBe(404);
      expect((await api(frozen, "GET", "/v1/profiles", u.bearer)).body).toEqual({ data: [], next_cursor: null });
    } finally {
      await frozen.stop();
    }
  });

  test("a row changed behind the service (another process on the same database) is read anew, not served stale", async () => {
    const id = (await create({ name: "before" })).body.id;
    expect((await api(t, "GET", `/v1/profiles/${id}`, alice.bearer)).body.name).toBe("before");
    await sqlRun(t, "UPDATE profiles SET name = 'after', updated_at = updated_at + 1 WHERE id = ?", [id]);
    expect((await api(t, "GET", `/v1/profiles/${id}`, alice.bearer)).body.name).toBe("after");
    const listed = (await api(t, "GET", "/v1/profiles?limit=100", alice.bearer)).body.data.find((p: { id: string }) => p.id === id);
    expect(listed.name).toBe("after");
  });
});

describe("list and delete", () => {
  test("newest first, paginated with next_cursor", async () => {
    const u = await createUser(t);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create({ name: `n${i}` }, u)).body.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await api(t, "GET", `/v1/profiles?limit=2${cursor ? `&cursor=${cursor}` : ""}`, u.bearer);
      expect(r.status).toBe(200);
      expect(r.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...r.body.data.map((p: { id: string }) => p.id));
      cursor = r.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(ids.reverse());
    const full = await api(t, "GET", "/v1/profiles", u.bearer);
    expect(full.body.next_cursor).toBeNull();
    expect(full.body.data[0].name).toBe("n4");
    expect(full.body.data[0].env).toEqual({});
  });

  test("DELETE → 204, then GET 404 and DELETE again 404", async () => {
    const id = (await create({})).body.id;
    const del = await api(t, "DELETE", `/v1/profiles/${id}`, alice.bearer);
    expect(del.status).toBe(204);
    expect(del.body).toBeNull();
    expect((await api(t, "GET", `/v1/profiles/${id}`, alice.bearer)).status).toBe(404);
    const again = await api(t, "DELETE", `/v1/profiles/${id}`, alice.bearer);
    expect(again.status).toBe(404);
    expect(again.body.code).toBe("NOT_FOUND");
    expect((await api(t, "PATCH", `/v1/profiles/${id}`, alice.bearer, { name: "z" })).status).toBe(404);
  });

  test("a garbage id is 404", async () => {
    // (A literal "/v1/profiles/../../etc" is normalised by the client to "/etc", the dashboard's.)
    expect((await api(t, "GET", "/v1/profiles/..%2F..%2Fetc", alice.bearer)).status).toBe(404);
    expect((await api(t, "GET", "/v1/profiles/..", alice.bearer)).status).not.toBe(500);
    expect((await api(t, "GET", "/v1/profiles/prof_' OR 1=1 --", alice.bearer)).status).toBe(404);
  });
});

describe("service interface for the runtime", () => {
  test("get returns the row for its owner and NOT_FOUND for anyone else; toApi is the API record", async () => {
    const s = t.app.services;
    const created = (await create({ env: { X: { secret: "S" } }, model: { provider: "openai", base_url: "http://127.0.0.1:9/v1" } })).body;
    const row = await s.profiles.get(alice.id, created.id);
    expect(row.user_id).toBe(alice.id);
    expect(row.model.base_url).toBe("http://127.0.0.1:9/v1");
    expect(typeof row.created_at).toBe("number");
    expect(s.profiles.toApi(row)).toEqual(created);
    let err: unknown;
    try {
      await s.profiles.get(bob.id, created.id);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe("NOT_FOUND");
  });
});

test("the OpenAPI document describes the profile routes and their bodies", async () => {
  const doc = (await api(t, "GET", "/v1/openapi.json", alice.bearer)).body;
  const post = doc.paths["/v1/profiles"].post;
  expect(post.tags).toEqual(["Profiles"]);
  expect(post.requestBody.content["application/json"].schema.properties.limits).toBeDefined();
  expect(Object.keys(post.responses)).toEqual(expect.arrayContaining(["201", "400", "401"]));
  expect(post.responses["201"].content["application/json"].schema.properties.model.properties.provider).toBeDefined();
  expect(doc.paths["/v1/profiles/{id}"].patch.responses["404"]).toBeDefined();
  expect(doc.paths["/v1/profiles/{id}"].delete.responses["204"]).toBeDefined();
});
