/**
 * A profile's max_concurrency holds across replicas: the reservation that counts a profile's
 * starting and running workspaces and inserts the new one is one transaction that first locks the
 * user's and the profile's rows (FOR NO KEY UPDATE, src/workspaces/store.ts), so reservations made
 * by several `runcell serve` processes on one PostgreSQL database run one after the other and each
 * counts what the others committed. Tasks submitted at once, spread over the replicas, on a fresh
 * profile with max_concurrency 2: exactly 2 are accepted, the rest answer 429 CONCURRENCY_LIMIT,
 * and the database never holds more than 2 sessions or active workspaces for it. Rounds with two
 * replicas, then with a third added (each replica reserves one workspace at a time, so three
 * replicas can race three reservations against a limit of two).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockAnthropic } from "../../helpers/mock-anthropic.ts";
import { waitFor } from "../../helpers/net.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { createProfile, type ReplicaSet, startReplicas } from "../../helpers/replicas.ts";

const mock = startMockAnthropic().script(() => ({ text: "ok" }));
const LIMIT = 2;
const ATTEMPTS = 12;
const ROUNDS = 3;

describe.skipIf(!PG_SERVER)("per-profile concurrency across replicas", () => {
  let r: ReplicaSet;
  beforeAll(async () => {
    r = await startReplicas(2);
  }, 60_000);
  afterAll(async () => {
    await r?.stop();
    await mock.stop();
  });

  async function round(): Promise<void> {
    const servers = r.servers;
    const made = await createProfile(r, servers[0]!, {
      name: "narrow",
      modelUrl: mock.url,
      limits: { max_concurrency: LIMIT, max_turns: 5, max_budget_usd: 1, memory_mb: 128, cpus: 0.5, pids: 64 },
    });
    expect(made.status).toBe(201);
    const profileId = (await made.json()).id as string;
    // Each replica verifies the token before the burst (so the requests reach the limit check together).
    for (const s of servers) expect((await fetch(s.url + "/v1/profiles", { headers: r.headers })).status).toBe(200);

    const results = await Promise.all(
      Array.from({ length: ATTEMPTS }, async (_, i) => {
        const via = i % servers.length;
        const res = await fetch(servers[via]!.url + "/v1/tasks", { method: "POST", headers: r.headers, body: JSON.stringify({ profile_id: profileId, prompt: `go ${i}` }) });
        return { via, status: res.status, body: await res.json() };
      }),
    );
    const summary = JSON.stringify(results.map((x) => [x.via, x.status, x.body.code]));
    const accepted = results.filter((x) => x.status === 202);
    const limited = results.filter((x) => x.status === 429);
    expect(accepted, summary).toHaveLength(LIMIT);
    expect(limited, summary).toHaveLength(ATTEMPTS - LIMIT);
    for (const x of limited) {
      expect(x.body.code).toBe("CONCURRENCY_LIMIT");
      expect(x.body.details).toMatchObject({ profile_id: profileId, max_concurrency: LIMIT });
    }
    // Every replica refused some: each one counted the others' reservations.
    expect(new Set(limited.map((x) => x.via)).size, summary).toBe(servers.length);

    const active = await r.sql`SELECT count(*)::int AS n FROM workspaces WHERE profile_id = ${profileId} AND status IN ('starting', 'running')`;
    expect(active[0].n).toBeLessThanOrEqual(LIMIT);
    const sessions = await r.sql`SELECT id FROM sessions WHERE profile_id = ${profileId}`;
    expect(sessions).toHaveLength(LIMIT);
    // The accepted tasks run to the end in the profile's two workspaces.
    const ids = accepted.map((x) => x.body.task_id as string);
    await waitFor(async () => (await r.sql`SELECT count(*)::int AS n FROM tasks WHERE id IN ${r.sql(ids)} AND status = 'completed'`)[0].n === LIMIT || null, { timeoutMs: 60_000, what: "the accepted tasks to complete" });
    expect(await r.sql`SELECT id FROM workspaces WHERE profile_id = ${profileId}`).toHaveLength(LIMIT);
    for (const s of sessions) expect((await fetch(`${servers[0]!.url}/v1/sessions/${s.id}`, { method: "DELETE", headers: r.headers })).status).toBe(204);
  }

  test(`${ATTEMPTS} tasks at once through two replicas on a profile with max_concurrency ${LIMIT}: exactly ${LIMIT} start, the rest get 429 CONCURRENCY_LIMIT (${ROUNDS} rounds)`, async () => {
    for (let i = 0; i < ROUNDS; i++) await round();
  }, 120_000);

  test(`the same through three replicas (${ROUNDS} rounds)`, async () => {
    await r.add();
    expect(r.servers).toHaveLength(3);
    for (let i = 0; i < ROUNDS; i++) await round();
  }, 120_000);
});
