/**
 * GET /v1/usage: the route table (401, bad dates, ranges and groupings → 400 on the field, success), and
 * the figures: tasks seeded at known times and costs are summed per UTC day (every day of the
 * range, zeros included) and per profile (most expensive first, deleted profiles named null),
 * never counting another user's tasks.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { seedFinishedTask } from "../../helpers/db.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api } from "../../helpers/users.ts";

let t: TestApp;
let a: Actors;
const DAY = 86_400_000;
const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);

const seedTask = (userId: string, profileId: string, at: number, cost: number, input = 100, output = 10) =>
  seedFinishedTask(t, { userId, profileId, at, costUsd: cost, inputTokens: input, outputTokens: output, turns: 1 });

let alpha: string;
let beta: string;

beforeAll(async () => {
  t = await startTestApp({ now: () => NOW });
  a = await actors(t);
  const mk = async (name: string) => (await api(t, "POST", "/v1/profiles", a.headers("owner"), { name, model: { provider: "demo" } })).body.id as string;
  alpha = await mk("alpha");
  beta = await mk("beta");
  await seedTask(a.owner.id, alpha, NOW - 2 * DAY, 0.5);
  await seedTask(a.owner.id, alpha, NOW - 2 * DAY + 3_600_000, 0.25);
  await seedTask(a.owner.id, beta, NOW - 1 * DAY, 1.0, 1000, 50);
  await seedTask(a.owner.id, "prof_deleted0000000000000000", NOW - 40 * DAY, 2.0);
  await seedTask(a.other.id, alpha, NOW - 1 * DAY, 99);
});
afterAll(() => t.stop());

routeTable("/v1/usage", () => a, [
  {
    route: "GET /v1/usage",
    invalid: [
      { name: "from not a date", query: "from=yesterday", field: "from" },
      { name: "a date followed by other text", query: "from=2026-11-27junk&to=2026-11-28", field: "from" },
      { name: "a date-time followed by other text", query: "from=2026-11-27&to=2026-11-28T00:00:00Zjunk", field: "to" },
      { name: "a date-time without Z or an offset (no time zone to read it in)", query: "from=2026-11-27T12:00:00&to=2026-11-28", field: "from" },
      { name: "a date-time with a space for the T", query: "from=2026-11-27%2012:00:00Z&to=2026-11-28", field: "from" },
      { name: "an hour that does not exist (25:00)", query: "from=2026-11-27T25:00:00Z&to=2026-11-28", field: "from" },
      { name: "a second that does not exist (:60)", query: "from=2026-11-27T12:00:60Z&to=2026-11-28", field: "from" },
      { name: "an offset that does not exist (+24:00)", query: "from=2026-11-27T12:00:00%2B24:00&to=2026-11-28", field: "from" },
      { name: "an offset without its colon", query: "from=2026-11-27T12:00:00%2B0100&to=2026-11-28", field: "from" },
      { name: "a date without its dashes", query: "from=20261127&to=2026-11-28", field: "from" },
      { name: "a month only", query: "from=2026-11&to=2026-11-28", field: "from" },
      { name: "a time without its date", query: "to=12:00:00Z", field: "to" },
      { name: "a day that does not exist (February 30th)", query: "from=2026-02-30T00:00:00Z&to=2026-03-10", field: "from" },
      { name: "a month that does not exist", query: "from=2026-01-01&to=2026-13-01", field: "to" },
      { name: "to not a date", query: "to=2026-13-45", field: "to" },
      { name: "from after to", query: "from=2026-11-10&to=2026-11-01", field: "from" },
      { name: "a range over 366 days", query: "from=2024-01-01&to=2026-01-01", field: "from" },
      { name: "an unknown grouping", query: "group_by=week", field: "group_by" },
    ],
    success: 200,
    check: (r) => {
      expect(r.body.group_by).toBe("day");
      expect(r.body.data).toHaveLength(31);
    },
  },
]);

describe("the figures", () => {
  test("per day: every UTC day of the range in order, zeros included; another user's tasks never counted", async () => {
    const r = await api(t, "GET", "/v1/usage?from=2026-11-20&to=2026-11-23", a.headers("owner"));
    expect(r.status).toBe(200);
    expect(r.body.data.map((b: { key: string; cost_usd: number; tasks: number }) => [b.key, b.tasks, b.cost_usd])).toEqual([
      ["2026-11-20", 0, 0],
      ["2026-11-21", 2, 0.75],
      ["2026-11-22", 1, 1],
    ]);
    expect(r.body.totals).toEqual({ tasks: 3, input_tokens: 1200, output_tokens: 70, cost_usd: 1.75 });
    expect(r.body.from).toBe("2026-11-20T00:00:00.000Z");
  });

  test("per profile: most expensive first, with names; a deleted profile's name is null", async () => {
    const r = await api(t, "GET", "/v1/usage?group_by=profile&from=2026-10-01&to=2026-11-24", a.headers("owner"));
    expect(r.body.data.map((b: { key: string; profile_name: string | null; cost_usd: number }) => [b.profile_name, b.cost_usd])).toEqual([
      [null, 2],
      ["beta", 1],
      ["alpha", 0.75],
    ]);
    expect(r.body.totals.cost_usd).toBe(3.75);
  });

  test("a date-time counts at the instant it names: Z or its offset, whatever the server's time zone", async () => {
    const tz = process.env.TZ;
    process.env.TZ = "Europe/Berlin";
    try {
      // 13:00+01:00 is 12:00Z, the first alpha task's instant: it counts (from is inclusive).
      const r = await api(t, "GET", "/v1/usage?from=2026-11-21T13:00:00%2B01:00&to=2026-11-22T12:00:00.001Z", a.headers("owner"));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect([r.body.from, r.body.to]).toEqual(["2026-11-21T12:00:00.000Z", "2026-11-22T12:00:00.001Z"]);
      expect(r.body.totals).toEqual({ tasks: 3, input_tokens: 1200, output_tokens: 70, cost_usd: 1.75 });
      // A millisecond later: only the second alpha task (13:00Z) is left; beta's 12:00Z is at `to` (exclusive).
      const later = await api(t, "GET", "/v1/usage?from=2026-11-21T12:00:00.001z&to=2026-11-22T12:00:00Z", a.headers("owner"));
      expect([later.body.from, later.body.totals.tasks, later.body.totals.cost_usd]).toEqual(["2026-11-21T12:00:00.001Z", 1, 0.25]);
      // A day is a UTC day, a minute without seconds is allowed, and a fraction past milliseconds is cut.
      const day = await api(t, "GET", "/v1/usage?from=2026-11-21&to=2026-11-21T23:59%2B00:00", a.headers("owner"));
      expect([day.body.from, day.body.to]).toEqual(["2026-11-21T00:00:00.000Z", "2026-11-21T23:59:00.000Z"]);
      const fine = await api(t, "GET", "/v1/usage?from=2026-11-21T00:00:00.123456789-02:30&to=2026-11-22", a.headers("owner"));
      expect(fine.body.from).toBe("2026-11-21T02:30:00.123Z");
    } finally {
      if (tz === undefined) delete process.env.TZ;
      else process.env.TZ = tz;
    }
  });

  test("the default range is the last 30 days to now", async () => {
    const r = await api(t, "GET", "/v1/usage", a.headers("owner"));
    expect(r.body.to).toBe(new Date(NOW).toISOString());
    expect(r.body.totals.cost_usd).toBe(1.75);
  });
});
