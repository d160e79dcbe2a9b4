/**
 * Whether the vault key opens what the database holds, checked once at start: a server started
 * with another key (a replica without the shared --vault-key-file, a data dir restored without
 * its secret.key) would otherwise serve, fail every delivery, playbook and task that needs a value
 * it cannot open, and seal new values no other server can open. One sealed value of each kind is
 * tried: a vault secret, a webhook secret, a playbook's trigger secret and — where replicas share
 * the database (PostgreSQL), since every installation has one — the file-URL signing key, which a
 * lone server may instead replace (src/workspaces/signing.ts). `runcell doctor` runs the same check.
 */
import { eq, isNotNull } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { integrations, playbooks, secrets, settings } from "../db/tables.ts";
import { isPostgres } from "../db/unit.ts";
import { type Sealer, VaultKeyError } from "../lib/sealer.ts";
import { integrationAad } from "../notifications/integrations.ts";
import { triggerAad } from "../playbooks/service.ts";
import { SIGNING_KEY_AAD, SIGNING_KEY_SETTING } from "../workspaces/signing.ts";
import { aadFor } from "./secrets.ts";

/** One sealed value of each kind the database holds, with the associated data it was sealed with. */
async function samples(db: DB): Promise<{ what: string; sealed: Uint8Array; aad: string }[]> {
  const out: { what: string; sealed: Uint8Array; aad: string }[] = [];
  const secret = await first(db.select({ user_id: secrets.user_id, name: secrets.name, sealed: secrets.ciphertext }).from(secrets));
  if (secret) out.push({ what: "a vault secret", sealed: secret.sealed, aad: aadFor(secret.user_id, secret.name) });
  const hook = await first(db.select({ id: integrations.id, user_id: integrations.user_id, sealed: integrations.secret_ciphertext }).from(integrations).where(isNotNull(integrations.secret_ciphertext)));
  if (hook?.sealed) out.push({ what: "a webhook secret", sealed: hook.sealed, aad: integrationAad(hook.id, hook.user_id) });
  const pb = await first(db.select({ id: playbooks.id, user_id: playbooks.user_id, sealed: playbooks.trigger_ciphertext }).from(playbooks));
  if (pb) out.push({ what: "a playbook's trigger secret", sealed: pb.sealed, aad: triggerAad(pb.id, pb.user_id) });
  if (isPostgres(db)) {
    const row = await first(db.select({ value: settings.value }).from(settings).where(eq(settings.key, SIGNING_KEY_SETTING)));
    const sealed = (row?.value as { sealed?: string } | undefined)?.sealed;
    if (sealed) out.push({ what: "the file-URL signing key", sealed: Buffer.from(sealed, "base64"), aad: SIGNING_KEY_AAD });
  }
  return out;
}

export async function checkVaultKeyOpens(db: DB, sealer: Sealer, keyPath: string): Promise<void> {
  for (const s of await samples(db)) {
    try {
      sealer.open(s.sealed, s.aad);
    } catch {
      throw new VaultKeyError(
        `the vault key ${keyPath} does not open this database's secrets (${s.what}): it is not the key they were stored with. ` +
          "Every server sharing a database must use the same key (--vault-key-file); a restored data dir needs the secret.key of its backup",
      );
    }
  }
}
