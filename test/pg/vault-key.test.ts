/**
 * On PostgreSQL, where replicas share the database, the start-up vault-key check also tries the
 * file-URL signing key every installation has: a replica started without the shared key (its own
 * new secret.key) is refused before it can replace that key for everyone — also on a database that
 * holds no secret, webhook or playbook yet.
 */
import { afterAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { VaultKeyError } from "../../src/lib/sealer.ts";
import { SIGNING_KEY_SETTING } from "../../src/workspaces/signing.ts";
import { startTestApp, tempDir } from "../helpers/app.ts";
import { PG_SERVER } from "../helpers/pg.ts";
import { sqlGet } from "../helpers/db.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const keyFile = () => {
  const d = tempDir("runcell-pg-key-");
  dirs.push(d);
  const path = join(d, "vault.key");
  writeFileSync(path, Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64") + "\n", { mode: 0o600 });
  return path;
};

test.skipIf(!PG_SERVER)("a second server with another key on the same database: refused at start, the signing key left as it was", async () => {
  const dataDir = tempDir("runcell-pg-key-data-");
  dirs.push(dataDir);
  const key = keyFile();
  const first = await startTestApp({ dataDir, keepDataDir: true, flags: ["--vault-key-file", key] });
  const before = JSON.stringify((await sqlGet(first, "SELECT value FROM settings WHERE key = ?", [SIGNING_KEY_SETTING]))!.value);
  await first.stop();
  const other = keyFile();
  const err = await startTestApp({ dataDir, keepDataDir: true, flags: ["--vault-key-file", other] }).catch((e) => e);
  expect(err).toBeInstanceOf(VaultKeyError);
  expect(err.message).toContain(`the vault key ${other} does not open this database's secrets (the file-URL signing key)`);
  const again = await startTestApp({ dataDir, keepDataDir: true, flags: ["--vault-key-file", key] });
  try {
    expect(JSON.stringify((await sqlGet(again, "SELECT value FROM settings WHERE key = ?", [SIGNING_KEY_SETTING]))!.value)).toBe(before);
  } finally {
    await again.stop();
  }
});
