/**
 * Fair delivery between webhooks: one user's receiver that never answers, with a backlog of 40
 * notifications, must not delay another user's delivery to a healthy receiver. The hanging
 * webhook holds at most PER_INTEGRATION attempts in flight, and once they have failed, one at a
 * time until a delivery succeeds again. Real local receivers (one hangs until its attempt times
 * out, one answers at once). Many hanging webhooks at once: hanging.test.ts.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { PER_INTEGRATION } from "../../src/notifications/worker.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { waitFor } from "../helpers/net.ts";
import { api } from "../helpers/users.ts";
import type { Receiver } from "./receiver.ts";
import { userWithWebhook as withWebhook } from "./webhook-user.ts";

// A 3 s timeout: without fairness the healthy delivery would wait for the first batch of hanging
// attempts to time out (~3 s), far above what is allowed below. Long waits keep retries out of it.
const FLAGS = ["--webhook-timeout", "3s", "--webhook-backoff", "30s"];

// One app per test: neither sees the other's hanging attempts end.
let t: TestApp;
let t2: TestApp;
const receivers: Receiver[] = [];
beforeAll(async () => {
  [t, t2] = await Promise.all([startTestApp({ flags: FLAGS }), startTestApp({ flags: FLAGS })]);
});
afterAll(async () => {
  for (const r of receivers) r.stop();
  await Promise.all([t?.stop(), t2?.stop()]);
});

const userWithWebhook = (t: TestApp, respond: () => Response | Promise<Response>) => withWebhook(t, receivers, respond);

test("a hanging webhook's backlog does not delay another user's delivery; it holds at most PER_INTEGRATION attempts", async () => {
  const hanging = await userWithWebhook(t, () => new Promise<Response>(() => {}));
  const fast = await userWithWebhook(t, () => new Response("ok"));

  for (let i = 0; i < 40; i++) expect((await api(t, "POST", "/v1/notifications", hanging.u.bearer, { message: `slow ${i}` })).status).toBe(202);
  await waitFor(() => hanging.rcv.received.length >= 1 || null, { what: "the hanging receiver's first request" });

  const sent = Date.now();
  const res = await api(t, "POST", "/v1/notifications", fast.u.bearer, { message: "fast" });
  expect(res.status).toBe(202);
  await waitFor(() => fast.rcv.received.length === 1 || null, { timeoutMs: 10_000, what: "the healthy delivery" });
  const latency = fast.rcv.received[0]!.at - sent;
  console.log(`healthy delivery after ${latency} ms, with 40 hanging notifications queued`);
  expect(latency).toBeLessThan(1000);
  await waitFor(async () => (await t.app.services.notifications.get(fast.u.id, res.body.id as string)).status === "delivered" || null, { what: "the healthy row delivered" });

  // Still inside the first timeout window: the hanging receiver got at most its share.
  expect(Date.now() - sent).toBeLessThan(2500);
  expect(hanging.rcv.received.length).toBe(PER_INTEGRATION);
  expect(t.app.services.notifications.worker.busy).toBe(PER_INTEGRATION);
}, 30_000);

/** Counts the worker's passes over the outbox during `ms` (wrapping the real method, which still runs). */
async function passesDuring(t: TestApp, ms: number) {
  const outbox = t.app.services.notifications.outbox;
  const step = outbox.step;
  let passes = 0;
  outbox.step = (...args) => (passes++, step.apply(outbox, args));
  try {
    await Bun.sleep(ms);
  } finally {
    outbox.step = step;
  }
  return passes;
}

test("once its attempts time out, the webhook is failing: one attempt at a time until one is delivered (no stall, no busy loop)", async () => {
  const t = t2;
  const hanging = await userWithWebhook(t, () => new Promise<Response>(() => {}));
  for (let i = 0; i < 6; i++) expect((await api(t, "POST", "/v1/notifications", hanging.u.bearer, { message: `slow ${i}` })).status).toBe(202);
  await waitFor(() => hanging.rcv.received.length >= PER_INTEGRATION || null, { what: "the first attempts" });
  // Its other rows are due but capped: the worker waits for an attempt to end instead of passing
  // over the outbox again and again.
  expect(await passesDuring(t, 1000)).toBeLessThanOrEqual(2); // the 5 s backstop sweep may fall in this second
  expect(hanging.rcv.received.length).toBe(PER_INTEGRATION);

  // The first batch times out after 3 s: the webhook is failing now, so only the 5th is sent…
  await waitFor(() => hanging.rcv.received.length >= PER_INTEGRATION + 1 || null, { timeoutMs: 8_000, what: "the next attempt" });
  expect(hanging.rcv.received[PER_INTEGRATION]!.at - hanging.rcv.received[0]!.at).toBeGreaterThanOrEqual(2900);
  expect(await passesDuring(t, 1000)).toBeLessThanOrEqual(2);
  expect(hanging.rcv.received.length).toBe(PER_INTEGRATION + 1);
  expect(t.app.services.notifications.worker.busy).toBe(1);
  expect(t.app.services.notifications.worker.failing).toBe(1);
  // …and the 6th only once the 5th has timed out too.
  await waitFor(() => hanging.rcv.received.length >= PER_INTEGRATION + 2 || null, { timeoutMs: 8_000, what: "the last of the backlog" });
  expect(hanging.rcv.received[PER_INTEGRATION + 1]!.at - hanging.rcv.received[PER_INTEGRATION]!.at).toBeGreaterThanOrEqual(2900);
}, 30_000);

test("a failing webhook sends one attempt at a time until one is delivered, then up to PER_INTEGRATION again", async () => {
  // The first request fails fast (500); every later one is answered after 300 ms.
  const w = await userWithWebhook(t, () => new Response("nope", { status: 500 }));
  const res = await api(t, "POST", "/v1/notifications", w.u.bearer, { message: "fails" });
  expect(res.status).toBe(202);
  await waitFor(async () => (await t.app.services.notifications.get(w.u.id, res.body.id as string)).last_error === "HTTP 500: nope" || null, { what: "the first attempt failed" });
  w.rcv.respond(async () => (await Bun.sleep(300), new Response("ok")));

  for (let i = 0; i < PER_INTEGRATION; i++) expect((await api(t, "POST", "/v1/notifications", w.u.bearer, { message: `n${i}` })).status).toBe(202);
  await waitFor(() => w.rcv.received.length >= 1 + PER_INTEGRATION || null, { what: "the notifications after the failure" });
  const at = w.rcv.received.slice(1).map((r) => r.at);
  // While failing: the first goes alone; the others only once it is delivered (300 ms later)…
  expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(250);
  // …and then side by side, no longer one at a time.
  expect(at[at.length - 1]! - at[1]!).toBeLessThan(200);
}, 30_000);
