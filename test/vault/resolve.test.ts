/**
 * The vault's interface for the runtime: resolveEnv, resolveApiKey and valuesFor, on a real app
 * with secrets stored through the API, plus the key surviving a restart.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import type { ModelConfig } from "../../src/db/schema.ts";
import { AppError } from "../../src/lib/errors.ts";
import { statusOf } from "../../src/http/errors.ts";
import { startTestApp, tempDir, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
const GH = `ghp_${crypto.randomUUID()}`;
const DB_PASS = `pw-${crypto.randomUUID()}`;
const ANT = `sk-ant-vault-${crypto.randomUUID()}`;

beforeAll(async () => {
  t = await startTestApp();
  [alice, bob] = await Promise.all([createUser(t), createUser(t)]);
  for (const [name, value] of [["GH_TOKEN", GH], ["DB_PASSWORD", DB_PASS], ["ANTHROPIC_KEY", ANT]]) {
    expect((await api(t, "PUT", `/v1/secrets/${name}`, alice.bearer, { value })).status).toBe(204);
  }
  await api(t, "PUT", "/v1/secrets/BOB_ONLY", bob.bearer, { value: "bob-value-1234" });
});
afterAll(() => t.stop());

const saved = { ANTHROPIC_API_KEY: process.env.ANTHROPIC_API_KEY, OPENAI_API_KEY: process.env.OPENAI_API_KEY };
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

async function thrown(fn: () => unknown): Promise<AppError> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof AppError) return e;
    throw e;
  }
  throw new Error("expected an AppError");
}

describe("resolveEnv", () => {
  test("literals pass through; secret references are decrypted", async () => {
    const env = await t.app.services.secrets.resolveEnv(alice.id, { LOG_LEVEL: "debug", EMPTY: "", GITHUB_TOKEN: { secret: "GH_TOKEN" }, PGPASSWORD: { secret: "DB_PASSWORD" } });
    expect(env).toEqual({ LOG_LEVEL: "debug", EMPTY: "", GITHUB_TOKEN: GH, PGPASSWORD: DB_PASS });
    expect(await t.app.services.secrets.resolveEnv(alice.id, {})).toEqual({});
  });

  test("a missing secret is VALIDATION_FAILED on env.<NAME>, naming the secret and no value", async () => {
    const e = await thrown(() => t.app.services.secrets.resolveEnv(alice.id, { GITHUB_TOKEN: { secret: "GH_TOKEN" }, NPM_TOKEN: { secret: "NPM" } }));
    expect(e.code).toBe("VALIDATION_FAILED");
    expect(statusOf(e)).toBe(400);
    expect(e.details).toMatchObject({ field: "env.NPM_TOKEN", secret_name: "NPM" });
    expect(e.message).toContain('"NPM"');
    expect(JSON.stringify(e.toBody())).not.toContain(GH);
  });

  test("another user's secret of that name is not visible", async () => {
    const e = await thrown(() => t.app.services.secrets.resolveEnv(bob.id, { T: { secret: "GH_TOKEN" } }));
    expect(e.details?.field).toBe("env.T");
    expect((await thrown(() => t.app.services.secrets.resolveEnv(alice.id, { T: { secret: "BOB_ONLY" } }))).details?.field).toBe("env.T");
  });

  test("a profile's env, stored through the API, resolves for its owner", async () => {
    const created = await api(t, "POST", "/v1/profiles", alice.bearer, { env: { GITHUB_TOKEN: { secret: "GH_TOKEN" }, MODE: "ci" } });
    const row = await t.app.services.profiles.get(alice.id, created.body.id);
    expect(await t.app.services.secrets.resolveEnv(alice.id, row.env)).toEqual({ GITHUB_TOKEN: GH, MODE: "ci" });
    // The profile itself only ever holds the reference.
    expect(JSON.stringify(created.body)).not.toContain(GH);
  });
});

describe("resolveApiKey", () => {
  const key = async (model: ModelConfig, user = alice.id) => (await t.app.services.secrets.resolveApiKey(user, model)).key;
  /** resolveApiKey's serverPaid, checked against paidByServer (the submit-time rule): one rule. */
  const serverPaid = async (model: ModelConfig, user = alice.id) => {
    const { serverPaid } = await t.app.services.secrets.resolveApiKey(user, model);
    expect(t.app.services.secrets.paidByServer(model)).toBe(serverPaid);
    return serverPaid;
  };

  test("api_key_secret comes from the vault and wins over the server's key", async () => {
    process.env.ANTHROPIC_API_KEY = "server-key";
    expect(await key({ provider: "anthropic", name: "claude-sonnet-4-5", api_key_secret: "ANTHROPIC_KEY" })).toBe(ANT);
    expect(await key({ provider: "openai", name: "x", base_url: "http://127.0.0.1:11434/v1", api_key_secret: "ANTHROPIC_KEY" })).toBe(ANT);
  });

  test("a missing api_key_secret is VALIDATION_FAILED on model.api_key_secret", async () => {
    const e = await thrown(() => key({ provider: "openai", name: "gpt-4.1", api_key_secret: "OPENAI_KEY" }));
    expect(e.code).toBe("VALIDATION_FAILED");
    expect(e.details).toMatchObject({ field: "model.api_key_secret", secret_name: "OPENAI_KEY" });
    expect(e.message).toContain("OPENAI_KEY");
  });

  test("otherwise the server's environment, read at call time, per provider", async () => {
    expect(await key({ provider: "anthropic", name: "claude-sonnet-4-5" })).toBeNull();
    expect(await key({ provider: "openai", name: "gpt-4.1" })).toBeNull();
    process.env.ANTHROPIC_API_KEY = "sk-ant-server";
    process.env.OPENAI_API_KEY = "sk-openai-server";
    expect(await key({ provider: "anthropic", name: "claude-sonnet-4-5" })).toBe("sk-ant-server");
    expect(await key({ provider: "openai", name: "gpt-4.1" })).toBe("sk-openai-server");
    expect(await key({ provider: "openai", name: "gpt-4.1", base_url: "https://api.openai.com/v1" })).toBe("sk-openai-server");
    expect(await key({ provider: "anthropic", name: "x", base_url: "https://api.anthropic.com" })).toBe("sk-ant-server");
  });

  test("the server's key is never handed out for a custom base_url", async () => {
    process.env.OPENAI_API_KEY = "sk-openai-server";
    process.env.ANTHROPIC_API_KEY = "sk-ant-server";
    expect(await key({ provider: "openai", name: "llama3", base_url: "http://127.0.0.1:11434/v1" })).toBeNull();
    expect(await key({ provider: "openai", name: "x", base_url: "https://api.openai.com.evil.example/v1" })).toBeNull();
    expect(await key({ provider: "anthropic", name: "x", base_url: "http://api.anthropic.com" })).toBeNull();
  });

  test("serverPaid: exactly when the server's own key is handed out (the monthly spend cap counts those requests)", async () => {
    delete process.env.ANTHROPIC_API_KEY;
    expect(await serverPaid({ provider: "anthropic", name: "x" })).toBe(false);
    process.env.ANTHROPIC_API_KEY = "sk-ant-server";
    process.env.OPENAI_API_KEY = "sk-openai-server";
    expect(await serverPaid({ provider: "anthropic", name: "x" })).toBe(true);
    expect(await serverPaid({ provider: "anthropic", name: "x", base_url: "https://api.anthropic.com" })).toBe(true);
    expect(await serverPaid({ provider: "openai", name: "x", base_url: "https://api.openai.com/v1" })).toBe(true);
    expect(await serverPaid({ provider: "anthropic", name: "x", api_key_secret: "ANTHROPIC_KEY" })).toBe(false);
    expect(await serverPaid({ provider: "anthropic", name: "x", base_url: "https://api.anthropic.com", api_key_secret: "ANTHROPIC_KEY" })).toBe(false);
    expect(await serverPaid({ provider: "openai", name: "x", base_url: "http://127.0.0.1:11434/v1" })).toBe(false);
    expect(await serverPaid({ provider: "demo", name: "demo" })).toBe(false);
  });

  test("demo needs no key", async () => {
    process.env.ANTHROPIC_API_KEY = "sk-ant-server";
    process.env.OPENAI_API_KEY = "sk-openai-server";
    expect(await key({ provider: "demo", name: "demo" })).toBeNull();
  });
});

describe("valuesFor", () => {
  test("every decrypted value of the user, and only theirs", async () => {
    expect((await t.app.services.secrets.valuesFor(alice.id)).sort()).toEqual([GH, DB_PASS, ANT].sort());
    expect(await t.app.services.secrets.valuesFor(bob.id)).toEqual(["bob-value-1234"]);
    expect(await t.app.services.secrets.valuesFor("usr_nobody")).toEqual([]);
  });
});

test("values never reached the logs", () => {
  const logs = t.logs.join("\n");
  for (const v of [GH, DB_PASS, ANT, "bob-value-1234"]) expect(logs).not.toContain(v);
});

test("the key file is created once: secrets stored before a restart decrypt after it", async () => {
  const dataDir = tempDir();
  try {
    const first = await startTestApp({ dataDir });
    const u = await createUser(first);
    expect((await api(first, "PUT", "/v1/secrets/PERSIST", u.bearer, { value: "survives-restart" })).status).toBe(204);
    await first.stop();
    const second = await startTestApp({ dataDir });
    try {
      expect(await second.app.services.secrets.resolveEnv(u.id, { P: { secret: "PERSIST" } })).toEqual({ P: "survives-restart" });
    } finally {
      await second.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
