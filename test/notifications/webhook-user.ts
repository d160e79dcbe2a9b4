/**
 * A user with a webhook integration whose receiver (./receiver.ts) answers with `respond`: the
 * set-up of the tests of several webhooks at once. The receiver is added to `receivers`, which the
 * test stops at its end.
 */
import { expect } from "bun:test";
import type { TestApp } from "../helpers/app.ts";
import { api, createUser } from "../helpers/users.ts";
import { type Receiver, type Responder, startReceiver } from "./receiver.ts";

export async function userWithWebhook(t: TestApp, receivers: Receiver[], respond: Responder) {
  const rcv = startReceiver({ respond });
  receivers.push(rcv);
  const u = await createUser(t);
  const res = await api(t, "POST", "/v1/integrations", u.bearer, { type: "webhook", config: { url: rcv.url + "/hook" } });
  // (The body says which refusal it was: a 401 here on PostgreSQL once, unexplained.)
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { rcv, u };
}
