/**
 * Whether the vault key opens what the database holds, checked once at start: a server started
 * with another key (a replica without the shared --vault-key-file, a data dir restored without
 * its secret.key) would otherwise serve, fail every delivery, playbook and task that needs a value
 * it cannot open, and seal new values no other server can open. One sealed value of each kind is
 * tried: a vault secret, a webhook secret, a playbook's trigger secret and — where replicas share
 * the database (PostgreSQL), since every installation has one — the file-URL signing key, which a
 * lone server may instead replace (src/workspaces/signing.ts). `runcell doctor` tries the same
 * values (`sealedSamples`) through its own connection.
 */
import { type Sealer, VaultKeyError } from "../lib/sealer.ts";
import { integrationAad } from "../notifications/integrations.ts";
import { triggerAad } from "../playbooks/service.ts";
import { SIGNING_KEY_AAD, SIGNING_KEY_SETTING } from "../workspaces/signing.ts";
import { aadFor } from "./secrets.ts";

/** The rows of a read-only statement, on either database (null: no database to read). */
export type RowReader = <T>(sql: string) => Promise<T[] | null>;

export interface SealedSample {
  what: string;
  sealed: Uint8Array;
  aad: string;
}

/** One sealed value of each kind the database holds (the signing key with `signingKey`), with the associated data it was sealed with. */
export async function sealedSamples(rows: RowReader, opts: { signingKey: boolean }): Promise<SealedSample[]> {
  const first = async <T>(sql: string) => (await rows<T>(sql))?.[0] ?? null;
  const out: SealedSample[] = [];
  const secret = await first<{ user_id: string; name: string; sealed: Uint8Array }>("SELECT user_id, name, ciphertext AS sealed FROM secrets LIMIT 1");
  if (secret) out.push({ what: "a vault secret", sealed: secret.sealed, aad: aadFor(secret.user_id, secret.name) });
  const hook = await first<{ id: string; user_id: string; sealed: Uint8Array }>("SELECT id, user_id, secret_ciphertext AS sealed FROM integrations WHERE secret_ciphertext IS NOT NULL LIMIT 1");
  if (hook) out.push({ what: "a webhook secret", sealed: hook.sealed, aad: integrationAad(hook.id, hook.user_id) });
  const pb = await first<{ id: string; user_id: string; sealed: Uint8Array }>("SELECT id, user_id, trigger_ciphertext AS sealed FROM playbooks LIMIT 1");
  if (pb) out.push({ what: "a playbook's trigger secret", sealed: pb.sealed, aad: triggerAad(pb.id, pb.user_id) });
  if (opts.signingKey) {
    const row = await first<{ value: unknown }>(`SELECT value FROM settings WHERE key = '${SIGNING_KEY_SETTING}'`);
    const value = typeof row?.value === "string" ? JSON.parse(row.value) : row?.value;
    const sealed = (value as { sealed?: string } | undefined)?.sealed;
    if (sealed) out.push({ what: "the file-URL signing key", sealed: Buffer.from(sealed, "base64"), aad: SIGNING_KEY_AAD });
  }
  return out;
}

/** The first sample the key does not open, if any. */
export function unopened(sealer: Sealer, samples: SealedSample[]): SealedSample | undefined {
  return samples.find((s) => {
    try {
      sealer.open(s.sealed, s.aad);
      return false;
    } catch {
      return true;
    }
  });
}

/**
 * Throws VaultKeyError unless the key opens what the database holds. `sealer` null: there is no
 * key yet (no <data dir>/secret.key) — fine for a database with nothing sealed (the caller then
 * creates one), but a database that holds sealed values needs its own key back, and a new one
 * would only be refused next (a data dir restored from a backup made with --vault-key-file).
 */
export async function checkVaultKeyOpens(rows: RowReader, sealer: Sealer | null, keyPath: string, opts: { signingKey: boolean }): Promise<void> {
  const samples = await sealedSamples(rows, opts);
  if (!sealer) {
    if (!samples.length) return;
    throw new VaultKeyError(
      `no vault key: ${keyPath} does not exist, and this database holds secrets sealed with a key (${samples[0]!.what}). ` +
        "Supply the key they were stored with: --vault-key-file <the original key file> (a backup made with --vault-key-file does not hold it), " +
        `or copy that key to ${keyPath} (mode 0600)`,
    );
  }
  const bad = unopened(sealer, samples);
  if (bad) {
    throw new VaultKeyError(
      `the vault key ${keyPath} does not open this database's secrets (${bad.what}): it is not the key they were stored with. ` +
        "Every server sharing a database must use the same key (--vault-key-file); a restored data dir needs the secret.key of its backup",
    );
  }
}
