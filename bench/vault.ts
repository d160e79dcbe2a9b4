/**
 * What the runtime pays per task for profiles and the vault, against baselines measured in the
 * same run:
 *   - profiles.get (prepared, owner-scoped)       vs a raw bun:sqlite prepared SELECT + JSON.parse of its columns
 *   - secrets.resolveEnv (10 secret references)   vs 10 raw SELECT + AES-256-GCM decrypts
 *   - secrets.valuesFor (user with 50 secrets)    vs one raw SELECT + 50 decrypts
 * Run: bun bench/vault.ts   (prints ratios and absolute µs per call; asserts nothing)
 */
import { createDecipheriv } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { createApp } from "../src/app.ts";
import { parseArgs, resolveConfig } from "../src/config.ts";
import { silentLogger } from "../src/log.ts";
import { tempDir } from "../test/helpers/app.ts";

const dataDir = tempDir("runcell-bench-vault-");
const config = resolveConfig(parseArgs(["--data-dir", dataDir, "--http", "127.0.0.1:0", "--workspace-image", "busybox:latest"]).flags, {});
const app = await createApp(config, { logger: silentLogger });
const s = app.services;

async function measure(fn: () => unknown, iterations: number): Promise<number> {
  for (let i = 0; i < Math.min(200, iterations); i++) await fn();
  const t0 = performance.now();
  for (let i = 0; i < iterations; i++) await fn();
  return ((performance.now() - t0) * 1000) / iterations; // µs per call
}

function report(name: string, ours: number, base: number) {
  console.log(`${name.padEnd(44)} ${(ours / base).toFixed(2)}×  (${ours.toFixed(2)} µs vs baseline ${base.toFixed(2)} µs)`);
}

try {
  const user = await s.users.create({ email: "bench@example.com", name: "bench", password: "correct horse battery", role: "admin" });
  for (let i = 0; i < 50; i++) await s.secrets.put(user.id, `SECRET_${i}`, `value-${i}-${crypto.randomUUID()}`);
  const env = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`VAR_${i}`, { secret: `SECRET_${i}` }]));
  const profile = await s.profiles.create(user.id, { env });

  const key = Buffer.from(readFileSync(join(dataDir, "secret.key"), "utf8").trim(), "base64");
  const decrypt = (buf: Uint8Array, aad: string) => {
    const b = Buffer.from(buf);
    const d = createDecipheriv("aes-256-gcm", key, b.subarray(0, 12));
    d.setAAD(Buffer.from(aad));
    d.setAuthTag(b.subarray(b.length - 16));
    return Buffer.concat([d.update(b.subarray(12, b.length - 16)), d.final()]).toString("utf8");
  };
  const rawProfile = s.sqlite!.query<Record<string, string>, [string, string]>("SELECT * FROM profiles WHERE id = ? AND user_id = ?");
  // The baseline decodes the JSON columns too, as any useful read must.
  const rawProfileRow = () => {
    const r = rawProfile.get(profile.id, user.id)!;
    return { ...r, model: JSON.parse(r.model!), tools: JSON.parse(r.tools!), env: JSON.parse(r.env!), limits: JSON.parse(r.limits!) };
  };
  const rawSecret = s.sqlite!.query<{ ciphertext: Uint8Array }, [string, string]>("SELECT ciphertext FROM secrets WHERE user_id = ? AND name = ?");
  const rawAll = s.sqlite!.query<{ name: string; ciphertext: Uint8Array }, [string]>("SELECT name, ciphertext FROM secrets WHERE user_id = ?");

  const N = 20_000;
  report("profiles.get", await measure(() => s.profiles.get(user.id, profile.id), N), await measure(rawProfileRow, N));
  report(
    "secrets.resolveEnv (10 references)",
    await measure(() => s.secrets.resolveEnv(user.id, env), N / 10),
    await measure(() => {
      const out: Record<string, string> = {};
      for (let i = 0; i < 10; i++) out[`VAR_${i}`] = decrypt(rawSecret.get(user.id, `SECRET_${i}`)!.ciphertext, `vault:${user.id}:SECRET_${i}`);
      return out;
    }, N / 10),
  );
  report(
    "secrets.valuesFor (50 secrets)",
    await measure(() => s.secrets.valuesFor(user.id), N / 20),
    await measure(() => rawAll.all(user.id).map((r) => decrypt(r.ciphertext, `vault:${user.id}:${r.name}`)), N / 20),
  );
} finally {
  await app.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
