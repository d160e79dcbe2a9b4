/**
 * The operator's policy (docs/security.md, src/admin/policy.ts) end to end on a real app with the
 * shipped defaults — but a $1 monthly spend cap and one running workspace per user, so those two
 * can be exceeded cheaply. One table, a row per limit and where it is checked; for each row:
 *
 * - a normal user exceeding the server's setting is refused with the documented status and code,
 *   `details.limit` naming the limit (and `details.field`, `details.max` where there are some);
 * - an admin-role user doing the same is not (admins are exempt from all but the disk cap);
 * - a per-user override (PATCH /admin/users/:id `policy`) raises it for that user only, and a
 *   field set to null returns the user to the server's setting;
 * - an override lowers it below the server's setting;
 * - a live PATCH /admin/config applies at once, without a restart, and back.
 *
 * Only max_running_workspaces starts containers. A task that passes the policy is stopped next by
 * its profile's own max_concurrency (1, taken by a recorded workspace without a container): the
 * answer then is that 429 (`details.limit` "max_concurrency", not the policy limit tested) instead of the policy's,
 * and no container starts. workspace_disk_mb is measured, not refused: its enforcement is in
 * test/workspaces/disk.test.ts; here only that it binds admins too and follows overrides.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { newId } from "../../src/db/ids.ts";
import { workspaces } from "../../src/db/tables.ts";
import type { PolicyKey } from "../../src/schema/policy.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { seedFinishedTask } from "../helpers/db.ts";
import { type Actors, actors } from "../helpers/scenarios.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { docker, insertProfile, insertSession } from "../workspaces/helpers.ts";

let t: TestApp;
let a: Actors;
const MB = 1024 * 1024;

// The server has a key of its own: a profile without one is then paid by it (src/vault/secrets.ts paidByServer).
const SERVER_KEY = "sk-ant-operator";
const savedKey = process.env.ANTHROPIC_API_KEY;

beforeAll(async () => {
  process.env.ANTHROPIC_API_KEY = SERVER_KEY;
  t = await startTestApp({ policy: "defaults", flags: ["--monthly-spend-usd", "1", "--max-running-workspaces-per-user", "1"] });
  a = await actors(t);
});
afterAll(async () => {
  await t.stop();
  if (savedKey === undefined) delete process.env.ANTHROPIC_API_KEY;
  else process.env.ANTHROPIC_API_KEY = savedKey;
});

type Res = Awaited<ReturnType<typeof api>>;
interface Ctx {
  profileId: string;
}

const auth = (u: TestUser) => ({ authorization: `Bearer ${u.token}` });
const post = (u: TestUser, path: string, body: unknown) => api(t, "POST", path, auth(u), body);
const admin = (method: string, path: string, body?: unknown) => api(t, method, path, a.headers("admin"), body);
const newProfile = (u: TestUser, over: Record<string, unknown> = {}) => post(u, "/v1/profiles", { name: "p", model: { provider: "demo" }, ...over });
const override = async (u: TestUser, policy: Record<string, unknown> | null) => {
  const r = await admin("PATCH", `/admin/users/${u.id}`, { policy });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r;
};
const setServer = async (policy: Record<string, unknown>) => {
  const r = await admin("PATCH", "/admin/config", { policy });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r;
};

/**
 * A profile whose one workspace slot (max_concurrency 1) is taken by a recorded running workspace
 * without a container: a task on it that passes the policy is refused next with that 429.
 */
async function probeProfile(u: TestUser, model: Record<string, unknown>): Promise<Ctx> {
  const r = await post(u, "/v1/profiles", { name: "probe", model, limits: { max_concurrency: 1 } });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const profileId = r.body.id as string;
  const sessionId = await insertSession(t, u.id, profileId);
  const id = newId("container");
  const now = Date.now();
  await t.app.services.db
    .insert(workspaces)
    .values({ id, user_id: u.id, session_id: sessionId, profile_id: profileId, name: `runcell-${id}`, image: t.config.workspaceImage, docker_id: null, volume: `runcell-${id}`, spec: { network: "none", memory_mb: 256, cpus: 0.5, pids: 128 }, status: "running", last_active_at: now, created_at: now, updated_at: now });
  return { profileId };
}

/** A task that passed the policy: refused by the probe profile's own concurrency, not by a policy limit. */
function passedToTheProfileLimit(r: Res, ctx: Ctx) {
  expect(r.status, JSON.stringify(r.body)).toBe(429);
  expect(r.body.code).toBe("CONCURRENCY_LIMIT");
  expect(r.body.details).toEqual({ limit: "max_concurrency", profile_id: ctx.profileId, max_concurrency: 1, retry_after: 10 });
  expect(r.headers.get("retry-after")).toBe("10");
}

/** A task paid by the server's own key (this month, counted by monthly_spend_usd). */
async function seedSpend(u: TestUser, profileId: string, usd: number, at = Date.now(), serverPaid = true): Promise<void> {
  await seedFinishedTask(t, { userId: u.id, profileId, costUsd: usd, serverPaid, at });
}

interface Row {
  limit: PolicyKey;
  /** Where it is checked. */
  where: string;
  status: number;
  code: string;
  /** details.field of the refusal. */
  field?: string;
  /** details.max of the refusal under the server's setting (details.min for a floor). */
  max?: number;
  /** A floor (min_schedule_interval): the refusal names it in details.min. */
  floor?: boolean;
  /** Made for every user of the row (e.g. the probe profile). */
  setup?: (u: TestUser) => Promise<Ctx | undefined>;
  /** Brings the user to the server's setting (e.g. 50 profiles, one running workspace). */
  fill?: (u: TestUser, ctx: Ctx | undefined) => Promise<void>;
  /** A request at exactly the server's setting (a ceiling is inclusive). */
  atMax?: (u: TestUser, ctx: Ctx | undefined) => Promise<Res>;
  /** The request that exceeds the server's setting once filled. */
  attempt: (u: TestUser, ctx: Ctx | undefined) => Promise<Res>;
  /** What the attempt answers when the policy lets it through. */
  passed: (r: Res, ctx: Ctx | undefined) => void;
  /** A setting that lets the attempt through. */
  raise: unknown;
  /** A request within the server's setting (unfilled user), and a setting that refuses it. */
  modest?: (u: TestUser, ctx: Ctx | undefined) => Promise<Res>;
  lower?: unknown;
}

const created = (r: Res) => expect(r.status, JSON.stringify(r.body)).toBe(201);
const ceiling = (limit: PolicyKey, field: string, over: number, max: number, raise: number, within: number, lower: number): Row => ({
  limit,
  where: "saving a profile",
  status: 400,
  code: "VALIDATION_FAILED",
  field: `limits.${field}`,
  max,
  atMax: (u) => newProfile(u, { limits: { [field]: max } }),
  attempt: (u) => newProfile(u, { limits: { [field]: over } }),
  passed: created,
  raise,
  modest: (u) => newProfile(u, { limits: { [field]: within } }),
  lower,
});
const taskCeiling = (limit: "max_turns" | "max_budget_usd", over: number, max: number, raise: number, within: number, lower: number): Row => ({
  limit,
  where: "a task's explicit limit at submit",
  status: 400,
  code: "VALIDATION_FAILED",
  field: limit,
  max,
  setup: (u) => probeProfile(u, { provider: "demo" }),
  atMax: (u, ctx) => post(u, "/v1/tasks", { profile_id: ctx!.profileId, prompt: "hi", [limit]: max }),
  attempt: (u, ctx) => post(u, "/v1/tasks", { profile_id: ctx!.profileId, prompt: "hi", [limit]: over }),
  passed: (r, ctx) => passedToTheProfileLimit(r, ctx!),
  raise,
  modest: (u, ctx) => post(u, "/v1/tasks", { profile_id: ctx!.profileId, prompt: "hi", [limit]: within }),
  lower,
});

/** The same ceilings when a playbook is saved: refused then, not only when one of its runs starts. */
const playbookCeiling = (limit: "max_turns" | "max_budget_usd", over: number, max: number, raise: number, within: number, lower: number): Row => {
  const playbook = (u: TestUser, ctx: Ctx | undefined, value: number) => post(u, "/v1/playbooks", { name: "pb", profile_id: ctx!.profileId, prompt: "p", [limit]: value });
  return {
    limit,
    where: "saving a playbook",
    status: 400,
    code: "VALIDATION_FAILED",
    field: limit,
    max,
    setup: async (u) => {
      const r = await newProfile(u);
      created(r);
      return { profileId: r.body.id };
    },
    atMax: (u, ctx) => playbook(u, ctx, max),
    attempt: (u, ctx) => playbook(u, ctx, over),
    passed: created,
    raise,
    modest: (u, ctx) => playbook(u, ctx, within),
    lower,
  };
};

const ROWS: Row[] = [
  {
    limit: "max_profiles",
    where: "creating a profile",
    status: 400,
    code: "VALIDATION_FAILED",
    field: "profile",
    max: 50,
    fill: async (u) => {
      for (let i = 0; i < 50; i++) await insertProfile(t, u.id, { name: `p${i}` });
    },
    attempt: (u) => newProfile(u),
    passed: created,
    raise: 51,
    modest: (u) => newProfile(u),
    lower: 1,
  },
  {
    limit: "max_running_workspaces",
    where: "a workspace starting",
    status: 429,
    code: "CONCURRENCY_LIMIT",
    max: 1,
    setup: async (u) => {
      const r = await newProfile(u);
      created(r);
      return { profileId: r.body.id };
    },
    fill: async (u, ctx) => created(await post(u, "/v1/sessions", { profile_id: ctx!.profileId })),
    attempt: (u, ctx) => post(u, "/v1/sessions", { profile_id: ctx!.profileId }),
    passed: created,
    raise: 2,
    modest: (u, ctx) => post(u, "/v1/sessions", { profile_id: ctx!.profileId }),
    lower: 0,
  },
  ceiling("max_memory_mb", "memory_mb", 4097, 4096, 8192, 2048, 1024),
  ceiling("max_cpus", "cpus", 2.5, 2, 4, 1, 0.5),
  ceiling("max_pids", "pids", 5000, 4096, 8192, 1024, 512),
  ceiling("max_concurrency", "max_concurrency", 11, 10, 20, 5, 2),
  ceiling("max_turns", "max_turns", 201, 200, 300, 50, 10),
  ceiling("max_budget_usd", "max_budget_usd", 25, 20, 50, 5, 1),
  taskCeiling("max_turns", 201, 200, 300, 50, 10),
  taskCeiling("max_budget_usd", 25, 20, 50, 5, 1),
  playbookCeiling("max_turns", 201, 200, 300, 50, 10),
  playbookCeiling("max_budget_usd", 25, 20, 50, 5, 1),
  {
    limit: "allowed_images",
    where: "saving a profile",
    status: 400,
    code: "VALIDATION_FAILED",
    field: "image",
    attempt: (u) => newProfile(u, { image: "alpine:3.20" }),
    passed: created,
    raise: ["alpine:*"],
    // Once the list names images, the server's workspace image is no longer implied.
    modest: (u) => newProfile(u, { image: t.config.workspaceImage }),
    lower: ["alpine:*"],
  },
  {
    limit: "allow_bridge_network",
    where: "saving a profile",
    status: 400,
    code: "VALIDATION_FAILED",
    field: "network",
    attempt: (u) => newProfile(u, { network: "bridge" }),
    passed: created,
    raise: true,
  },
  {
    limit: "monthly_spend_usd",
    where: "submitting a task paid by the server's key",
    status: 402,
    code: "BUDGET_EXCEEDED",
    max: 1,
    setup: async (u) => {
      const ctx = await probeProfile(u, { provider: "anthropic" });
      await seedSpend(u, ctx.profileId, 0.5);
      return ctx;
    },
    fill: async (u, ctx) => seedSpend(u, ctx!.profileId, 1),
    attempt: (u, ctx) => post(u, "/v1/tasks", { profile_id: ctx!.profileId, prompt: "hi" }),
    passed: (r, ctx) => passedToTheProfileLimit(r, ctx!),
    raise: 5,
    modest: (u, ctx) => post(u, "/v1/tasks", { profile_id: ctx!.profileId, prompt: "hi" }),
    lower: 0.25,
  },
  (() => {
    const playbook = (u: TestUser, ctx: Ctx | undefined, schedule: string) => post(u, "/v1/playbooks", { name: "pb", profile_id: ctx!.profileId, prompt: "p", schedule });
    return {
      limit: "min_schedule_interval",
      where: "saving a playbook's schedule",
      status: 400,
      code: "VALIDATION_FAILED",
      field: "schedule",
      max: 60,
      floor: true,
      setup: async (u) => {
        const r = await newProfile(u);
        created(r);
        return { profileId: r.body.id };
      },
      // Once a minute is exactly the default floor (inclusive); twice a minute is under it.
      atMax: (u, ctx) => playbook(u, ctx, "0 * * * * *"),
      attempt: (u, ctx) => playbook(u, ctx, "*/30 * * * * *"),
      passed: created,
      raise: 30,
      modest: (u, ctx) => playbook(u, ctx, "*/5 * * * *"),
      lower: 600,
    } satisfies Row;
  })(),
];

function expectRefused(r: Res, row: Row, max = row.max) {
  expect(r.status, JSON.stringify(r.body)).toBe(row.status);
  expect(r.body.code).toBe(row.code);
  expect(r.body.details.limit).toBe(row.limit);
  if (row.field) expect(r.body.details.field).toBe(row.field);
  if (max !== undefined) expect(r.body.details[row.floor ? "min" : "max"]).toBe(max);
  // The message names the limit too (and says what to do).
  expect(r.body.error).toContain(row.limit);
  // A 429 says when to try again, in the header and in details (what a stream error frame carries).
  if (row.status === 429) {
    expect(r.body.details.retry_after).toBe(10);
    expect(r.headers.get("retry-after")).toBe("10");
  }
}

/** A user of the row, set up and (unless `fill` is false) filled to the server's setting. */
async function userOf(row: Row, opts: { role?: "admin" | "user"; fill?: boolean } = {}) {
  const u = await createUser(t, { role: opts.role ?? "user" });
  const ctx = await row.setup?.(u);
  if (opts.fill !== false) await row.fill?.(u, ctx);
  return { u, ctx };
}

describe("each limit", () => {
  for (const row of ROWS) {
    describe(`${row.limit} (${row.where})`, () => {
      test(`a user exceeding it → ${row.status} ${row.code}, details.limit = ${row.limit}`, async () => {
        const { u, ctx } = await userOf(row);
        if (row.atMax) row.passed(await row.atMax(u, ctx), ctx);
        expectRefused(await row.attempt(u, ctx), row);
        // Refused again: nothing was consumed by the refusal.
        expectRefused(await row.attempt(u, ctx), row);
      });

      test("an admin-role user is exempt", async () => {
        const { u, ctx } = await userOf(row, { role: "admin" });
        row.passed(await row.attempt(u, ctx), ctx);
      });

      test("an override raises it for that user only; null returns the user to the server's setting", async () => {
        const one = await userOf(row);
        const two = await userOf(row);
        const r = await override(one.u, { [row.limit]: row.raise });
        expect(r.body.policy).toEqual({ [row.limit]: row.raise });
        row.passed(await row.attempt(one.u, one.ctx), one.ctx);
        expectRefused(await row.attempt(two.u, two.ctx), row);
        await override(one.u, { [row.limit]: null });
        expectRefused(await row.attempt(one.u, one.ctx), row);
      });

      if (row.modest && row.lower !== undefined) {
        test("an override lowers it below the server's setting", async () => {
          const { u, ctx } = await userOf(row, { fill: false });
          row.passed(await row.modest!(u, ctx), ctx);
          await override(u, { [row.limit]: row.lower });
          expectRefused(await row.modest!(u, ctx), row, typeof row.lower === "number" ? row.lower : undefined);
        });
      }

      test("a live PATCH /admin/config applies at once, and back", async () => {
        const before = (await admin("GET", "/admin/config")).body.policy[row.limit];
        expect(before).not.toEqual(row.raise);
        const { u, ctx } = await userOf(row);
        expectRefused(await row.attempt(u, ctx), row);
        try {
          const r = await setServer({ [row.limit]: row.raise });
          expect(r.body.policy[row.limit]).toEqual(row.raise);
          row.passed(await row.attempt(u, ctx), ctx);
        } finally {
          await setServer({ [row.limit]: before });
        }
        expectRefused(await row.attempt(u, ctx), row);
      });
    });
  }
});

describe("beyond the table", () => {
  test("max_running_workspaces counts across all the user's profiles, and refuses a task before it is queued", async () => {
    const u = await createUser(t);
    const first = await newProfile(u);
    const second = await newProfile(u);
    created(await post(u, "/v1/sessions", { profile_id: first.body.id }));
    const row = ROWS.find((r) => r.limit === "max_running_workspaces")!;
    expectRefused(await post(u, "/v1/sessions", { profile_id: second.body.id }), row);
    expectRefused(await post(u, "/v1/tasks", { profile_id: second.body.id, prompt: "hi" }), row);
    const tasks = await api(t, "GET", "/v1/tasks", auth(u));
    expect(tasks.body.data).toEqual([]);
    const me = await api(t, "GET", "/v1/me", auth(u));
    expect(me.body.usage).toMatchObject({ profiles: 2, running_workspaces: 1 });
  });

  test("a limit left out gets its default fitted to the user's ceiling; one sent over the ceiling is still refused", async () => {
    const u = await createUser(t);
    await override(u, { max_memory_mb: 512, max_turns: 20, max_cpus: 0.5, max_concurrency: 2, max_budget_usd: 1 });
    const r = await newProfile(u);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.limits).toMatchObject({ memory_mb: 512, max_turns: 20, cpus: 0.5, max_concurrency: 2, max_budget_usd: 1, pids: 1024 });
    const over = await newProfile(u, { limits: { memory_mb: 1024 } });
    expect(over.status).toBe(400);
    expect(over.body.details).toMatchObject({ field: "limits.memory_mb", limit: "max_memory_mb", max: 512 });
    // The operator's default concurrency above the ceiling: a new profile gets the ceiling.
    const before = (await admin("GET", "/admin/config")).body.default_max_concurrency;
    await override(u, null);
    const cfg = await admin("PATCH", "/admin/config", { default_max_concurrency: 50 });
    expect(cfg.status, JSON.stringify(cfg.body)).toBe(200);
    try {
      const fitted = await newProfile(u);
      expect(fitted.status, JSON.stringify(fitted.body)).toBe(201);
      expect(fitted.body.limits.max_concurrency).toBe((await admin("GET", "/admin/config")).body.policy.max_concurrency);
      // An admin has no ceilings: the operator's default as it is.
      const mine = await newProfile(await createUser(t, { role: "admin" }));
      expect(mine.body.limits.max_concurrency).toBe(50);
    } finally {
      await admin("PATCH", "/admin/config", { default_max_concurrency: before });
    }
  });

  test("a profile saved before a ceiling was lowered can still be edited: only what a change changes is held to the ceilings", async () => {
    const u = await createUser(t);
    await override(u, { max_memory_mb: 512, allow_bridge_network: true });
    const made = await newProfile(u, { network: "bridge" });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    await override(u, { max_memory_mb: 256, allow_bridge_network: false });
    const path = `/v1/profiles/${made.body.id}`;
    const renamed = await api(t, "PATCH", path, auth(u), { name: "renamed" });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(renamed.body).toMatchObject({ name: "renamed", network: "bridge", limits: { memory_mb: 512 } });
    // Changing the limit itself: held to the new ceiling.
    const raised = await api(t, "PATCH", path, auth(u), { limits: { memory_mb: 384 } });
    expect(raised.status).toBe(400);
    expect(raised.body.details).toMatchObject({ field: "limits.memory_mb", max: 256 });
    expect((await api(t, "PATCH", path, auth(u), { limits: { memory_mb: 256 } })).status).toBe(200);
    // Turning bridge back on after switching it off is a change: refused.
    expect((await api(t, "PATCH", path, auth(u), { network: "none" })).status).toBe(200);
    expect((await api(t, "PATCH", path, auth(u), { network: "bridge" })).body.details).toMatchObject({ field: "network" });
  });

  test("a profile saved before the ceilings were lowered gets its container clamped to them (bridge becomes none)", async () => {
    const u = await createUser(t);
    await override(u, { allow_bridge_network: true });
    const p = await newProfile(u, { network: "bridge", limits: { memory_mb: 2048, cpus: 1, pids: 1024 } });
    created(p);
    await override(u, { allow_bridge_network: null, max_memory_mb: 512, max_cpus: 0.5, max_pids: 256 });
    const s = await post(u, "/v1/sessions", { profile_id: p.body.id });
    created(s);
    const row = (await t.app.services.workspaces.forSession(s.body.id))!;
    expect(row.spec).toEqual({ network: "none", memory_mb: 512, cpus: 0.5, pids: 256 });
    const hc = (await docker.getContainer(row.docker_id!).inspect()).HostConfig;
    expect([hc.Memory, hc.NanoCpus, hc.PidsLimit, hc.NetworkMode]).toEqual([512 * MB, 0.5e9, 256, "none"]);
  });

  test("monthly_spend_usd counts only this month's server-paid tasks; a profile with its own key is not capped", async () => {
    const u = await createUser(t);
    const ctx = await probeProfile(u, { provider: "anthropic" });
    const monthStart = new Date();
    monthStart.setUTCDate(1);
    monthStart.setUTCHours(0, 0, 0, 0);
    await seedSpend(u, ctx.profileId, 50, monthStart.getTime() - 86_400_000);
    await seedSpend(u, ctx.profileId, 50, Date.now(), false);
    await seedSpend(u, ctx.profileId, 0.99);
    passedToTheProfileLimit(await post(u, "/v1/tasks", { profile_id: ctx.profileId, prompt: "hi" }), ctx);
    await seedSpend(u, ctx.profileId, 0.01);
    const r = await post(u, "/v1/tasks", { profile_id: ctx.profileId, prompt: "hi" });
    expect(r.status).toBe(402);
    expect(r.body.details).toEqual({ limit: "monthly_spend_usd", max: 1, spent: 1 });
    // Server-paid means the server's own key (no api_key_secret; no base_url or the provider's own): the same user's profile with their own key is not capped.
    const own = await probeProfile(u, { provider: "anthropic", api_key_secret: "MY_ANTHROPIC_KEY" });
    passedToTheProfileLimit(await post(u, "/v1/tasks", { profile_id: own.profileId, prompt: "hi" }), own);
    // Nor is one when the server has no key of its own to pay with.
    delete process.env.ANTHROPIC_API_KEY;
    try {
      passedToTheProfileLimit(await post(u, "/v1/tasks", { profile_id: ctx.profileId, prompt: "hi" }), ctx);
    } finally {
      process.env.ANTHROPIC_API_KEY = SERVER_KEY;
    }
  });

  test("min_schedule_interval is checked over the next runs, not only the first two; the refusal says the minimum and how the operator changes it", async () => {
    const u = await createUser(t);
    const profile = (await newProfile(u)).body.id as string;
    const playbook = (schedule: string, timezone = "UTC") => post(u, "/v1/playbooks", { name: "pb", profile_id: profile, prompt: "p", schedule, timezone });
    // Seconds 0 and 30 of the first minute of every hour: 30 s apart once an hour.
    const bunched = await playbook("0,30 0 * * * *");
    expect([bunched.status, bunched.body.details]).toEqual([400, { field: "schedule", reason: "too frequent", limit: "min_schedule_interval", min: 60 }]);
    expect(bunched.body.error).toContain("30 s apart");
    expect(bunched.body.error).toContain("once every 60 s");
    expect(bunched.body.error).toContain("--min-schedule-interval");
    expect(bunched.body.error).toContain("PATCH /admin/config");
    for (const ok of ["0 3 * * *", "@hourly", "* * * * *", "0,1 * * * *"]) created(await playbook(ok));
  });

  test("a schedule saved before min_schedule_interval was raised stays: the playbook can be edited, a new schedule or time zone is held to it", async () => {
    const u = await createUser(t);
    const profile = (await newProfile(u)).body.id as string;
    const pb = await post(u, "/v1/playbooks", { name: "pb", profile_id: profile, prompt: "p", schedule: "*/2 * * * *" });
    created(pb);
    await override(u, { min_schedule_interval: 300 });
    const patch = (body: unknown) => api(t, "PATCH", `/v1/playbooks/${pb.body.id}`, auth(u), body);
    const renamed = await patch({ name: "renamed", enabled: false });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect((await patch({ enabled: true })).status).toBe(200);
    expect((await api(t, "GET", `/v1/playbooks/${pb.body.id}`, auth(u))).body.schedule).toBe("*/2 * * * *");
    for (const body of [{ schedule: "*/3 * * * *" }, { timezone: "Europe/Berlin" }]) {
      const r = await patch(body);
      expect([r.status, r.body.details.field, r.body.details.min], JSON.stringify(body)).toEqual([400, "schedule", 300]);
    }
    expect((await patch({ schedule: "*/5 * * * *" })).status).toBe(200);
  });

  test("workspace_disk_mb binds admins too, and follows overrides and live changes", async () => {
    const policy = t.app.services.policy;
    const adm = await createUser(t, { role: "admin" });
    const u = await createUser(t);
    const me = await api(t, "GET", "/v1/me", auth(adm));
    expect(me.body.limits).toMatchObject({ exempt: true, workspace_disk_mb: 10_240 });
    expect(await policy.diskCapBytes(adm.id)).toBe(10_240 * MB);
    await override(u, { workspace_disk_mb: 5 });
    expect(await policy.diskCapBytes(u.id)).toBe(5 * MB);
    await override(u, { workspace_disk_mb: 0 });
    expect(await policy.diskCapBytes(u.id)).toBeNull();
    try {
      await setServer({ workspace_disk_mb: 20 });
      expect(await policy.diskCapBytes(adm.id)).toBe(20 * MB);
      expect(await policy.diskCapBytes(u.id)).toBeNull();
    } finally {
      await setServer({ workspace_disk_mb: 10_240 });
    }
  });
});
