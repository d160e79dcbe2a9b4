/**
 * The rules of vault secrets a schema cannot state (the syntax is src/schema/secret.ts): a value's
 * size in UTF-8 bytes, no NUL; and the name check with the field it belongs to (a profile's `env`
 * and `model.api_key_secret` name secrets too).
 */
import { Errors } from "../lib/errors.ts";
import { SCRUB_MIN_LENGTH } from "../lib/secret-forms.ts";
import { SECRET_NAME, SECRET_VALUE_MAX_BYTES } from "../schema/secret.ts";

export { SECRET_NAME, SECRET_VALUE_MAX_BYTES, SECRETS_PER_USER } from "../schema/secret.ts";

/** Throws VALIDATION_FAILED on `field` unless `name` is a well-formed secret name. */
export function checkSecretName(name: unknown, field: string): string {
  if (typeof name !== "string") throw Errors.validation(field, `${field} must be a string (a secret name)`, { reason: "expected string" });
  if (!SECRET_NAME.test(name)) {
    throw Errors.validation(field, `${field} is not a valid secret name: use 1–64 letters, digits and underscores, not starting with a digit`, {
      reason: "invalid secret name",
    });
  }
  return name;
}

/** Throws VALIDATION_FAILED on `value` unless it can be stored (never echoes the value). */
export function checkSecretValue(value: unknown): string {
  if (typeof value !== "string") throw Errors.validation("value", "value must be a string", { reason: "expected string" });
  if (value.length === 0) throw Errors.validation("value", "value must not be empty", { reason: "empty" });
  // Shorter values could not be scrubbed from output without garbling ordinary text: such a value
  // would show wherever the agent prints it. (Not secret? Put it in the profile's env as a literal.)
  if (value.length < SCRUB_MIN_LENGTH) {
    throw Errors.validation("value", `value must be at least ${SCRUB_MIN_LENGTH} characters: a shorter one could not be scrubbed from the agent's output (a value that is not secret belongs in the profile's env as a literal)`, {
      reason: "too short",
      min_length: SCRUB_MIN_LENGTH,
    });
  }
  if (Buffer.byteLength(value, "utf8") > SECRET_VALUE_MAX_BYTES) {
    throw Errors.validation("value", `value must be at most ${SECRET_VALUE_MAX_BYTES} bytes`, { reason: "too large", limit_bytes: SECRET_VALUE_MAX_BYTES });
  }
  if (value.includes("\0")) throw Errors.validation("value", "value must not contain NUL characters (it becomes an environment variable)", { reason: "NUL character" });
  return value;
}
