/** The signature scheme against the known test vector and Stripe's verifier of the same scheme. */
import { expect, test } from "bun:test";
import Stripe from "stripe";
import { signatureHeader, signatureV1 } from "../../src/notifications/sign.ts";
import { verifyHmac, verifyWithStripe } from "./receiver.ts";

const SECRET = "whsec_test_secret";
const BODY = '{"id":"evt_1","type":"task.completed"}';
const V1 = "54968a799fa4843e627df0ea4ffda1878c3b4224f89113d4236ecaee45c49637";

test("the known test vector", () => {
  expect(signatureV1(SECRET, 1700000000, BODY)).toBe(V1);
  expect(signatureHeader(SECRET, BODY, 1700000000_999)).toBe(`t=1700000000,v1=${V1}`);
});

test("Stripe's own header generator agrees byte for byte", async () => {
  const stripe = new Stripe("sk_test_unused");
  const theirs = await stripe.webhooks.generateTestHeaderStringAsync({ payload: BODY, secret: SECRET, timestamp: 1700000000 });
  expect(theirs).toBe(`t=1700000000,v1=${V1}`);
});

test("both independent verifiers accept our header and reject tampering", async () => {
  const header = signatureHeader(SECRET, BODY, 1700000000_000);
  expect(verifyHmac(header, BODY, SECRET)).toBe(true);
  expect(await verifyWithStripe(header, BODY, SECRET, 1700000000_000)).toBe(true);
  expect(verifyHmac(header, BODY + " ", SECRET)).toBe(false);
  expect(await verifyWithStripe(header, BODY + " ", SECRET, 1700000000_000)).toBe(false);
  expect(verifyHmac(header, BODY, "whsec_other")).toBe(false);
  expect(await verifyWithStripe(header, BODY, "whsec_other", 1700000000_000)).toBe(false);
  // Stripe also enforces its replay window on t.
  expect(await verifyWithStripe(header, BODY, SECRET, 1700000000_000 + 600_000)).toBe(false);
});
