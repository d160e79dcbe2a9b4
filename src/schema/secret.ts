/**
 * Vault secrets: their names (the only thing the API ever shows) and the syntax and size rules
 * of names and values, shared by the vault and by profiles (whose `env` and
 * `model.api_key_secret` name secrets).
 */
import { secrets } from "../db/schema.ts";
import { Body, recordColumns, type Static, T, Timestamp } from "./common.ts";

/** Like an environment variable name: letter or underscore first, then letters, digits, underscores. */
export const SECRET_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_]{0,63}$";
export const SECRET_NAME = new RegExp(SECRET_NAME_PATTERN);
/** Largest value, in UTF-8 bytes (a PEM key or a service-account JSON fits comfortably). */
export const SECRET_VALUE_MAX_BYTES = 64 * 1024;
/** Secrets per user. */
export const SECRETS_PER_USER = 500;

export const SecretName = T.String({
  pattern: SECRET_NAME_PATTERN,
  description: "Secret name: 1–64 letters, digits, underscores; not starting with a digit",
  examples: ["GITHUB_TOKEN"],
  "x-hint": "use 1–64 letters, digits and underscores, not starting with a digit",
});

export const SecretRecord = T.Object({ ...recordColumns(secrets, ["name"]), created_at: Timestamp, updated_at: Timestamp }, { title: "Secret" });
export type SecretRecord = Static<typeof SecretRecord>;

export const SecretPutBody = Body({ value: T.String({ description: `The secret (1 to ${SECRET_VALUE_MAX_BYTES} bytes of UTF-8, no NUL); write-only` }) });
export const SecretNameParam = T.Object({ name: T.String({ description: SecretName.description, examples: ["GITHUB_TOKEN"] }) });
