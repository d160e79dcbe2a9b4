/**
 * Whether the vault key opens what the database holds, checked once at start: a server started
 * with another key (a replica without the shared --vault-key-file, a data dir restored without
 * its secret.key) would otherwise serve, fail every delivery and task that needs a secret it
 * claims, and seal new values no other server can open. One stored secret (or webhook secret) is
 * tried; `runcell doctor` runs the same check.
 */
import { isNotNull } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { integrations, secrets } from "../db/tables.ts";
import { type Sealer, VaultKeyError } from "../lib/sealer.ts";
import { integrationAad } from "../notifications/integrations.ts";
import { aadFor } from "./secrets.ts";

export async function checkVaultKeyOpens(db: DB, sealer: Sealer, keyPath: string): Promise<void> {
  const secret = await first(db.select({ user_id: secrets.user_id, name: secrets.name, ciphertext: secrets.ciphertext }).from(secrets));
  const hook = secret ? undefined : await first(db.select({ id: integrations.id, user_id: integrations.user_id, sealed: integrations.secret_ciphertext }).from(integrations).where(isNotNull(integrations.secret_ciphertext)));
  try {
    if (secret) sealer.open(secret.ciphertext, aadFor(secret.user_id, secret.name));
    else if (hook?.sealed) sealer.open(hook.sealed, integrationAad(hook.id, hook.user_id));
  } catch {
    throw new VaultKeyError(
      `the vault key ${keyPath} does not open this database's secrets: it is not the key they were stored with. ` +
        "Every server sharing a database must use the same key (--vault-key-file); a restored data dir needs the secret.key of its backup",
    );
  }
}
