import { expect, test } from "bun:test";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client.ts";
import { startTestApp, tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";
import { api, createUser } from "../helpers/users.ts";

test("runcell backup copies a consistent database and the key while the server runs; the copy serves", async () => {
  const t = await startTestApp({ keepDataDir: true });
  const user = await createUser(t);
  expect((await api(t, "PUT", "/v1/secrets/KEEP", user.bearer, { value: "survives-the-backup" })).status).toBe(204);
  const dest = join(tempDir(), "b1");
  const r = await runCli(["backup", "--data-dir", t.dataDir, dest]);
  expect(r.code, r.stderr).toBe(0);
  expect(statSync(join(dest, "runcell.db")).mode & 0o777).toBe(0o600);
  expect(statSync(join(dest, "secret.key")).mode & 0o777).toBe(0o600);
  const again = await runCli(["backup", "--data-dir", t.dataDir, dest]);
  expect(again.code).toBe(1);
  expect(again.stderr).toContain("already exists");
  await t.stop();

  const h = openDatabase(join(dest, "runcell.db"));
  expect(h.sqlite.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
  h.close();
  // The backup is a working data dir: the secret still decrypts with the copied key.
  const restored = await startTestApp({ dataDir: dest });
  expect(restored.app.services.secrets.valuesFor(user.id)).toEqual(["survives-the-backup"]);
  await restored.stop();
});

test("backup usage errors", async () => {
  expect((await runCli(["backup"])).code).toBe(2);
  const r = await runCli(["backup", "--data-dir", join(tempDir(), "nothing-here"), join(tempDir(), "dest")]);
  expect(r.code).toBe(1);
  expect(r.stderr).toContain("no database");
  expect(existsSync(join(tempDir(), "dest"))).toBe(false);
});
