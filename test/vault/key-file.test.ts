/**
 * --vault-key-file: the vault key outside the data dir.
 * - serve seals with that key and never makes <data dir>/secret.key; a second server (its own data
 *   dir, the same key file) opens what the first one sealed — how replicas will share the key;
 * - a missing key file stops serve before the database is touched (exit 2, the fix in the message);
 * - doctor checks the file and that it opens the stored secrets (the wrong key is a FAIL);
 * - a backup says where the key is instead of warning that it has none.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Sealer } from "../../src/lib/sealer.ts";
import { aadFor } from "../../src/vault/secrets.ts";
import { startTestApp, tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";
import { api, createUser } from "../helpers/users.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function dir() {
  const d = tempDir("runcell-vault-key-");
  dirs.push(d);
  return d;
}
function keyFile(at: string): string {
  const path = join(at, "vault.key");
  writeFileSync(path, Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64") + "\n", { mode: 0o600 });
  return path;
}

describe("--vault-key-file", () => {
  test("serve seals with it, makes no secret.key, and another server with the same key opens the secret", async () => {
    const key = keyFile(dir());
    const t = await startTestApp({ flags: ["--vault-key-file", key] });
    try {
      const u = await createUser(t);
      const put = await api(t, "PUT", "/v1/secrets/GITHUB_TOKEN", { authorization: `Bearer ${u.token}` }, { value: "ghp_shared_between_replicas" });
      expect(put.status).toBeLessThan(300);
      expect(existsSync(join(t.dataDir, "secret.key"))).toBe(false);
      const row = t.app.services.sqlite!.query("SELECT ciphertext FROM secrets WHERE user_id = ? AND name = ?").get(u.id, "GITHUB_TOKEN") as { ciphertext: Uint8Array };
      // Any process holding the same file opens it: the key is all a second replica needs.
      expect(Sealer.fromFile(key).open(row.ciphertext, aadFor(u.id, "GITHUB_TOKEN"))).toBe("ghp_shared_between_replicas");
      const other = await startTestApp({ flags: ["--vault-key-file", key] });
      try {
        expect(other.app.services.sealer.open(row.ciphertext, aadFor(u.id, "GITHUB_TOKEN"))).toBe("ghp_shared_between_replicas");
      } finally {
        await other.stop();
      }
    } finally {
      await t.stop();
    }
  });

  test("a missing key file: serve exits 2 (a configuration error) naming the fix, and nothing is made: no data dir, no lock", async () => {
    const d = dir();
    const data = join(d, "data");
    const r = await runCli(["serve", "--data-dir", data, "--http", "127.0.0.1:0", "--vault-key-file", join(d, "nope.key")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`the vault key file ${join(d, "nope.key")} does not exist`);
    expect(r.stderr).toContain("head -c 32 /dev/urandom | base64");
    expect(r.stderr).not.toContain("    at ");
    expect(existsSync(join(data, "runcell.db"))).toBe(false);
    expect(existsSync(data)).toBe(false);
    // A malformed one too (checked before the data dir is touched, like --admin-password-file).
    writeFileSync(join(d, "short.key"), "c2hvcnQ=\n", { mode: 0o600 });
    const bad = await runCli(["serve", "--data-dir", data, "--http", "127.0.0.1:0", "--vault-key-file", join(d, "short.key")]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("does not hold a 32-byte base64 key");
    expect(existsSync(data)).toBe(false);
  });

  test("doctor: OK when the key opens the stored secrets, FAIL for another key or none", async () => {
    const d = dir();
    const data = join(d, "data");
    const key = keyFile(d);
    const t = await startTestApp({ dataDir: data, flags: ["--vault-key-file", key] });
    const u = await createUser(t);
    await t.app.services.secrets.put(u.id, "OPENAI_API_KEY", "sk-doctor");
    await t.stop();
    const line = (out: string) => out.split("\n").find((l) => /^\S+\s+vault key:/.test(l)) ?? "";

    const good = await runCli(["doctor", "--data-dir", data, "--vault-key-file", key]);
    expect(line(good.stdout)).toContain("OK");
    expect(line(good.stdout)).toContain("it opens the stored secrets");
    expect(line(good.stdout)).toContain("backups do not hold it");

    const wrong = await runCli(["doctor", "--data-dir", data, "--vault-key-file", keyFile(dir())]);
    expect(wrong.code).toBe(1);
    expect(line(wrong.stdout)).toContain("FAIL");
    expect(wrong.stdout).toContain("does not open this database's secrets");

    const missing = await runCli(["doctor", "--data-dir", data, "--vault-key-file", join(d, "gone.key")]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toContain("does not exist: serve will not start");
  });

  test("serve with a key that does not open the stored secrets (a replica without the shared key) exits 2 naming it; a webhook or playbook trigger secret alone is checked too", async () => {
    for (const what of ["secret", "webhook", "playbook"] as const) {
      const d = dir();
      const data = join(d, "data");
      const key = keyFile(d);
      const t = await startTestApp({ dataDir: data, flags: ["--vault-key-file", key, "--allow-private-webhooks"] });
      const u = await createUser(t);
      if (what === "secret") await t.app.services.secrets.put(u.id, "OPENAI_API_KEY", "sk-replica");
      else if (what === "webhook") expect((await api(t, "POST", "/v1/integrations", { authorization: `Bearer ${u.token}` }, { type: "webhook", config: { url: "http://127.0.0.1:9/hook", secret: "whsec_x" } })).status).toBe(201);
      else {
        const profile = await api(t, "POST", "/v1/profiles", { authorization: `Bearer ${u.token}` }, { name: "p", model: { provider: "demo" } });
        expect((await api(t, "POST", "/v1/playbooks", { authorization: `Bearer ${u.token}` }, { name: "pb", profile_id: profile.body.id, prompt: "hi" })).status).toBe(201);
      }
      await t.stop();
      const other = keyFile(dir());
      const r = await runCli(["serve", "--data-dir", data, "--http", "127.0.0.1:0", "--vault-key-file", other]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`the vault key ${other} does not open this database's secrets`);
      expect(r.stderr).toContain("--vault-key-file");
      expect(r.stderr).not.toContain("    at ");
      // With the right key it starts.
      const again = await startTestApp({ dataDir: data, flags: ["--vault-key-file", key] });
      await again.stop();
    }
  });

  test("restored from a backup made with it, served without it: exit 2 saying the key is missing and how to supply it; no new secret.key left behind", async () => {
    const d = dir();
    const data = join(d, "data");
    const key = keyFile(d);
    const t = await startTestApp({ dataDir: data, flags: ["--vault-key-file", key] });
    const u = await createUser(t);
    await t.app.services.secrets.put(u.id, "OPENAI_API_KEY", "sk-restored");
    await t.stop();
    const archive = join(d, "b.tar.gz");
    expect((await runCli(["backup", "--data-dir", data, "--vault-key-file", key, archive])).code).toBe(0);
    const restored = join(d, "restored");
    const r = await runCli(["restore", archive, "--data-dir", restored]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("the backup has no secret.key");
    expect(r.stdout).toContain("--vault-key-file");
    expect(r.stdout).not.toContain("serve creates a new key");

    for (let i = 0; i < 2; i++) {
      const s = await runCli(["serve", "--data-dir", restored, "--http", "127.0.0.1:0"]);
      expect(s.code, s.stderr).toBe(2);
      expect(s.stderr).toContain(`no vault key: ${join(restored, "secret.key")} does not exist, and this database holds secrets sealed with a key (a vault secret)`);
      expect(s.stderr).toContain("--vault-key-file");
      expect(s.stderr).not.toContain("does not open this database's secrets");
      expect(existsSync(join(restored, "secret.key"))).toBe(false);
    }
    const line = (await runCli(["doctor", "--data-dir", restored])).stdout.split("\n").find((l) => /^\S+\s+vault key:/.test(l)) ?? "";
    expect(line).toContain("FAIL");
    expect(line).toContain("is missing");
    // With the original key it starts.
    const again = await startTestApp({ dataDir: restored, flags: ["--vault-key-file", key] });
    try {
      expect(await again.app.services.secrets.valuesFor(u.id)).toEqual(["sk-restored"]);
    } finally {
      await again.stop();
    }
  });

  test("backup: no key in the archive, and the report says where the key is", async () => {
    const d = dir();
    const data = join(d, "data");
    const key = keyFile(d);
    const t = await startTestApp({ dataDir: data, flags: ["--vault-key-file", key] });
    await t.stop();
    const archive = join(d, "b.tar.gz");
    const r = await runCli(["backup", "--data-dir", data, "--vault-key-file", key, archive]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`the vault key is not in this backup: it is ${key}`);
    expect(r.stdout + r.stderr).not.toContain("warning: no secret.key");
    const listing = Bun.spawnSync(["tar", "-tzf", archive]).stdout.toString();
    expect(listing).not.toContain("secret.key");
    expect(readdirSync(data)).not.toContain("secret.key");
  });
});
