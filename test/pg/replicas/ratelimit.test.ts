/**
 * The rate limit across two real replicas (`runcell serve` processes on one PostgreSQL database):
 * each enforces its share of the configured limit (burst 21 → 11 each, 60/min → 30/min each), so
 * a caller whose requests alternate between them gets the configured burst plus at most N−1 = 1
 * token of rounding (plus what refills meanwhile) — not twice the burst, as two independent
 * buckets would give. RateLimit-Limit and Retry-After describe the answering replica's share; a
 * PATCH /admin/config through one replica changes the limit on both; when a replica leaves, the
 * other one's share grows back to the whole limit.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { waitFor } from "../../helpers/net.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { type ReplicaSet, startReplicas } from "../../helpers/replicas.ts";

const PER_MINUTE = 60;
const BURST = 21;
const N = 2;
const SHARE = Math.ceil(BURST / N);
const ADMIN = "replica rate limit admin password";
/** The burst after the PATCH through one replica. */
const PATCHED_BURST = 41;

describe.skipIf(!PG_SERVER)("the rate limit across two replicas", () => {
  let set: ReplicaSet;
  beforeAll(async () => {
    // server-process.ts passes huge limits first; these come later and win.
    set = await startReplicas(N, { env: { RUNCELL_ADMIN_PASSWORD: ADMIN }, flags: ["--rate-limit-per-minute", String(PER_MINUTE), "--rate-limit-burst", String(BURST), "--replica-lease", "3s"] });
  }, 60_000);
  afterAll(() => set?.stop());

  /** The burst each replica enforces now (/healthz reports the client address's bucket, untouched). */
  const shareOn = async (url: string) => Number((await fetch(url + "/healthz")).headers.get("ratelimit-limit"));

  test("requests alternated between the replicas: the configured burst plus at most N−1 and the refill pass, then 429 with the share's Retry-After", async () => {
    const [a, b] = set.servers as [(typeof set.servers)[0], (typeof set.servers)[0]];
    // The first replica counts the second at its next heartbeat (a third of the lease).
    await waitFor(async () => (await shareOn(a.url)) === SHARE && (await shareOn(b.url)) === SHARE, { timeoutMs: 10_000, what: "both replicas to count two live replicas" });
    const ids = new Set([(await (await fetch(a.url + "/healthz")).json()).replica, (await (await fetch(b.url + "/healthz")).json()).replica]);
    expect(ids.size).toBe(2);

    // Each replica verifies the token once (a bcrypt compare paid from the address's bucket): done
    // before the count, so every counted request is a cheap one on the user's bucket.
    const started = performance.now();
    const statuses: number[] = [];
    const refused: { headers: Headers; body: { code: string; error: string } }[] = [];
    for (let i = 0; i < 4 * BURST; i++) {
      const server = i % 2 ? b : a;
      const r = await fetch(server.url + "/v1/profiles", { headers: set.headers });
      statuses.push(r.status);
      expect(r.headers.get("x-runcell-replica")).toBe(i % 2 ? [...ids][1] : [...ids][0]);
      expect(r.headers.get("ratelimit-limit")).toBe(String(SHARE));
      if (r.status === 429) refused.push({ headers: r.headers, body: await r.json() });
      else await r.arrayBuffer();
    }
    const seconds = (performance.now() - started) / 1000;
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    const accepted = statuses.filter((s) => s === 200).length;
    // What refills while the requests run: the whole configured rate (each replica its share), rounded up.
    const refill = Math.ceil((seconds * N * Math.ceil(PER_MINUTE / N)) / 60);
    expect(accepted).toBeGreaterThanOrEqual(BURST);
    expect(accepted).toBeLessThanOrEqual(BURST + (N - 1) + refill);
    // Two independent whole buckets would have let 2 × BURST through.
    expect(accepted).toBeLessThan(2 * BURST);
    // Both replicas refused once their share was spent; Retry-After is the share's refill (30/min: 2 s).
    expect(refused.length).toBeGreaterThan(0);
    const body = refused[0]!.body;
    expect(body.code).toBe("RATE_LIMITED");
    expect(body.error).toContain(`across ${N} replicas`);
    // Each refusal's Retry-After is the time to its next token, rounded up: 1 or 2 s with the share,
    // and 2 s right after a token was spent; with the whole rate (60/min) it could never be 2.
    const retryAfter = refused.map((r) => Number(r.headers.get("retry-after")));
    expect(retryAfter.every((s) => s === 1 || s === 2)).toBe(true);
    expect(Math.max(...retryAfter)).toBe(2);
    const refusedBy = new Set(statuses.map((s, i) => (s === 429 ? i % 2 : -1)).filter((x) => x >= 0));
    expect(refusedBy).toEqual(new Set([0, 1]));
  }, 60_000);

  test("PATCH /admin/config through one replica changes the limit on the other at once (its share of the new burst)", async () => {
    const [a, b] = set.servers as [(typeof set.servers)[0], (typeof set.servers)[0]];
    const admin = { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" };
    const patched = await fetch(a.url + "/admin/config", { method: "PATCH", headers: admin, body: JSON.stringify({ rate_limit: { burst: PATCHED_BURST } }) });
    expect(patched.status).toBe(200);
    expect((await patched.json()).rate_limit).toEqual({ per_minute: PER_MINUTE, burst: PATCHED_BURST });
    expect(await shareOn(a.url)).toBe(Math.ceil(PATCHED_BURST / N));
    // B hears of it over the bus (well before any restart or heartbeat).
    await waitFor(async () => (await shareOn(b.url)) === Math.ceil(PATCHED_BURST / N), { timeoutMs: 2_000, what: "replica B to apply the new burst" });
    expect((await (await fetch(b.url + "/admin/config", { headers: admin })).json()).rate_limit).toEqual({ per_minute: PER_MINUTE, burst: PATCHED_BURST });
  });

  test("a replica that leaves (SIGTERM marks its row not live): the other one's share grows back to the whole limit", async () => {
    const [a, b] = set.servers as [(typeof set.servers)[0], (typeof set.servers)[0]];
    expect(await b.kill("SIGTERM")).toBe(0);
    await waitFor(async () => (await shareOn(a.url)) === PATCHED_BURST, { timeoutMs: 10_000, what: "the remaining replica to enforce the whole burst" });
    // Still registered (its warm-pool members wait for it), no longer live.
    const rows = await set.sql`SELECT id, seen_at FROM replicas ORDER BY seen_at`;
    expect(rows).toHaveLength(2);
    expect(Number(rows[0].seen_at)).toBeLessThan(Date.now() - 1000);
  }, 30_000);
});
