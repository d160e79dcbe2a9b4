/** Password hashing (src/auth/passwords.ts): composed form, and hashes made before it still verify. */
import { expect, test } from "bun:test";
import { Algorithm, hash } from "@node-rs/argon2";
import { hashPassword, passwordLength, verifyPassword } from "../../src/auth/passwords.ts";

const nfc = "Ångström café".normalize("NFC");
const nfd = nfc.normalize("NFD");

test("a password is hashed composed: either spelling verifies", async () => {
  const h = await hashPassword(nfd);
  expect(await verifyPassword(h, nfc)).toBe(true);
  expect(await verifyPassword(h, nfd)).toBe(true);
  expect(await verifyPassword(h, "Angstrom cafe")).toBe(false);
});

test("a hash of a decomposed password made before passwords were composed still verifies with the password as typed", async () => {
  const legacy = await hash(nfd, { algorithm: Algorithm.Argon2id, memoryCost: 19456, timeCost: 2, parallelism: 1 });
  expect(await verifyPassword(legacy, nfd)).toBe(true);
  expect(await verifyPassword(legacy, "wrong")).toBe(false);
});

test("length counts characters (code points of the composed form)", () => {
  expect(passwordLength("😀😀😀😀")).toBe(4);
  expect(passwordLength(nfd)).toBe(passwordLength(nfc));
});
