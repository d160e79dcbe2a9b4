/**
 * Many hanging webhooks must not starve a healthy one. Real local receivers: N of them accept the
 * request and never answer (each attempt ends at the timeout), one answers at once. Under a plain
 * per-webhook cap, 8 such webhooks (8 × 4) already hold every slot, and every other user's
 * delivery waits for the timeout, again after each retry. Here the healthy delivery must arrive
 * well before the hanging attempts' timeout:
 * - while the hanging webhooks are still unknown (their first attempts in flight): their 2nd–4th
 *   attempts leave RESERVED_SLOTS free;
 * - once their attempts have timed out (they are failing): each holds one slot, and all of them
 *   together no more than CONCURRENCY − RESERVED_SLOTS, however many there are.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { CONCURRENCY, PER_INTEGRATION, RESERVED_SLOTS } from "../../src/notifications/worker.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { sqlAll } from "../helpers/db.ts";
import { waitFor } from "../helpers/net.ts";
import { api } from "../helpers/users.ts";
import type { Receiver } from "./receiver.ts";
import { userWithWebhook as withWebhook } from "./webhook-user.ts";

const TIMEOUT_MS = 3000;
/** "Promptly": a third of the hanging attempts' timeout. */
const PROMPT_MS = 1000;
// Short waits: the hanging webhooks' retries keep coming (their users keep "producing events").
const FLAGS = ["--webhook-timeout", `${TIMEOUT_MS}ms`, "--webhook-backoff", "1s"];

let t1: TestApp;
let t2: TestApp;
const receivers: Receiver[] = [];
beforeAll(async () => {
  [t1, t2] = await Promise.all([startTestApp({ flags: FLAGS }), startTestApp({ flags: FLAGS })]);
});
afterAll(async () => {
  await Promise.all([t1?.stop(), t2?.stop()]);
  for (const r of receivers) r.stop();
});

const userWithWebhook = (t: TestApp, respond: () => Response | Promise<Response>) => withWebhook(t, receivers, respond);

const hang = () => new Promise<Response>(() => {});

async function hangingWebhooks(t: TestApp, n: number, each: number) {
  const hanging = await Promise.all(Array.from({ length: n }, () => userWithWebhook(t, hang)));
  const posted = await Promise.all(hanging.flatMap((h) => Array.from({ length: each }, (_, i) => api(t, "POST", "/v1/notifications", h.u.bearer, { message: `slow ${i}` }))));
  for (const res of posted) expect(res.status).toBe(202);
  return hanging;
}

const total = (hanging: { rcv: Receiver }[]) => hanging.reduce((s, h) => s + h.rcv.received.length, 0);

/** Sends one notification to the healthy webhook and answers how long it took to arrive. */
async function healthyLatency(t: TestApp, healthy: { rcv: Receiver; u: { id: string; bearer: Record<string, string> } }) {
  const before = healthy.rcv.received.length;
  const sent = Date.now();
  const res = await api(t, "POST", "/v1/notifications", healthy.u.bearer, { message: "healthy" });
  expect(res.status).toBe(202);
  await waitFor(() => healthy.rcv.received.length > before || null, { timeoutMs: 2 * TIMEOUT_MS + 2000, what: "the healthy delivery" });
  return healthy.rcv.received[before]!.at - sent;
}

/** This server's attempts in flight per integration (their leased rows). */
async function leasesPerIntegration(t: TestApp) {
  const rows = await sqlAll<{ integration_id: string; n: number }>(
    t,
    "SELECT integration_id, COUNT(*) AS n FROM notification_log WHERE status = 'pending' AND lease_id IS NOT NULL GROUP BY integration_id",
  );
  return rows.map((r) => Number(r.n));
}

test(`12 hanging webhooks (12 × ${PER_INTEGRATION} > ${CONCURRENCY} slots) do not delay a healthy delivery, even before their first timeout`, async () => {
  const t = t1;
  const hanging = await hangingWebhooks(t, 12, 6);
  const healthy = await userWithWebhook(t, () => new Response("ok"));
  // Let the claims settle: the hanging webhooks have taken every slot they may take.
  let seen = -1;
  await waitFor(
    async () => {
      const now = total(hanging);
      const settled = now >= 12 && now === seen;
      seen = now;
      return settled || (await Bun.sleep(150), null);
    },
    { what: "the hanging webhooks' first attempts" },
  );
  // Still the first window: the healthy delivery is due before any hanging attempt has timed out.
  expect(Date.now() - Math.min(...hanging.flatMap((h) => h.rcv.received.map((r) => r.at)))).toBeLessThan(TIMEOUT_MS - PROMPT_MS);
  const busy = t.app.services.notifications.worker.busy;
  const firsts = hanging.map((h) => h.rcv.received.length);

  const latency = await healthyLatency(t, healthy);
  console.log(`healthy delivery after ${latency} ms beside 12 hanging webhooks (first window, ${busy} attempts of theirs in flight)`);
  expect(latency).toBeLessThan(PROMPT_MS);
  expect(busy).toBeLessThanOrEqual(CONCURRENCY - RESERVED_SLOTS);
  // Every hanging webhook got its first attempt out (none waits behind the others' extra ones).
  for (const n of firsts) expect(n).toBeGreaterThanOrEqual(1);
}, 30_000);

test(`40 hanging webhooks that keep retrying, once failing, hold 1 slot each and ${CONCURRENCY} − ${RESERVED_SLOTS} at most: healthy deliveries go out at once, again and again`, async () => {
  const t = t2;
  const N = 40;
  const hanging = await hangingWebhooks(t, N, 3);
  const healthy = await userWithWebhook(t, () => new Response("ok"));
  // Every hanging webhook has had an attempt time out: all of them are failing now.
  await waitFor(() => hanging.every((h) => h.rcv.received.length >= 1) || null, { timeoutMs: 3 * TIMEOUT_MS, what: "a first attempt to every hanging webhook" });
  const lastFirst = Math.max(...hanging.map((h) => h.rcv.received[0]!.at));
  await Bun.sleep(Math.max(0, lastFirst + TIMEOUT_MS + 500 - Date.now()));

  for (let round = 0; round < 3; round++) {
    const leases = await leasesPerIntegration(t);
    const latency = await healthyLatency(t, healthy);
    console.log(`healthy delivery after ${latency} ms beside ${N} failing webhooks (${leases.length} attempts of theirs in flight), round ${round + 1}`);
    expect(latency).toBeLessThan(PROMPT_MS);
    expect(Math.max(...leases)).toBe(1);
    expect(leases.length).toBeLessThanOrEqual(CONCURRENCY - RESERVED_SLOTS);
    await Bun.sleep(700);
  }
  expect(t.app.services.notifications.worker.failing).toBe(N);
  // The failing webhooks are throttled, not starved: their attempts still go out.
  const before = total(hanging);
  await waitFor(() => total(hanging) > before || null, { timeoutMs: 2 * TIMEOUT_MS, what: "further attempts to the hanging webhooks" });
}, 60_000);
