/**
 * Encryption at rest for secrets (vault values, webhook secrets): AES-256-GCM under a 32-byte key
 * kept in `<data-dir>/secret.key` (created at first start, mode 0600), or in the file
 * `--vault-key-file` names (never created: the operator makes it and keeps it out of the data dir
 * and its backups; servers sharing a database share it). A sealed value is
 * 12-byte nonce ‖ ciphertext ‖ 16-byte tag; `aad` binds it to its owner and purpose, so a row
 * copied onto another user's record does not decrypt.
 */
import { createCipheriv, createDecipheriv } from "node:crypto";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "./crypto.ts";
import { isDenied, isMissing, readableFix, unreadableReason } from "./file-access.ts";

export const KEY_FILE = "secret.key";

/** The vault key cannot be had (a missing or malformed key file): the server does not start. */
export class VaultKeyError extends Error {
  /** `malformed`: the file was read and holds no key (else: missing, unreadable, or the wrong key). */
  constructor(message: string, readonly malformed = false) {
    super(message);
  }
}

/** A file's 32-byte base64 key. */
export function readKey(path: string): Buffer {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    if (isMissing(e)) throw new VaultKeyError(`the vault key file ${path} does not exist: make one with \`head -c 32 /dev/urandom | base64 > ${path}; chmod 600 ${path}\` (for a new installation), or copy the secret.key of the data dir whose secrets it must open`);
    // Never the hint above: the key may well be there, and a new one over it loses every stored secret.
    throw new VaultKeyError(`the vault key file ${path} ${unreadableReason(e)}${isDenied(e) ? `: ${readableFix(path)}` : ""}`);
  }
  const key = Buffer.from(text.trim(), "base64");
  if (key.length !== 32) throw new VaultKeyError(`${path} does not hold a 32-byte base64 key`, true);
  return key;
}

export class Sealer {
  private constructor(private key: Buffer) {}

  static fromDataDir(dataDir: string): Sealer {
    const path = join(dataDir, KEY_FILE);
    if (!existsSync(path)) {
      writeFileSync(path, Buffer.from(randomBytes(32)).toString("base64") + "\n", { mode: 0o600, flag: "wx" });
    }
    chmodSync(path, 0o600);
    return new Sealer(readKey(path));
  }

  /** The key in `path` (--vault-key-file); it must exist: a new key would not open what is stored. */
  static fromFile(path: string): Sealer {
    return new Sealer(readKey(path));
  }

  /** --vault-key-file's key when given, else the data dir's secret.key. */
  static forConfig(config: { dataDir: string; vaultKeyFile: string | null }): Sealer {
    return config.vaultKeyFile ? Sealer.fromFile(config.vaultKeyFile) : Sealer.fromDataDir(config.dataDir);
  }

  static fromKey(key: Uint8Array): Sealer {
    return new Sealer(Buffer.from(key));
  }

  seal(plaintext: string, aad: string): Buffer {
    const nonce = Buffer.from(randomBytes(12));
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return Buffer.concat([nonce, body, cipher.getAuthTag()]);
  }

  open(sealed: Uint8Array, aad: string): string {
    const buf = Buffer.from(sealed);
    const decipher = createDecipheriv("aes-256-gcm", this.key, buf.subarray(0, 12));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(buf.subarray(buf.length - 16));
    return Buffer.concat([decipher.update(buf.subarray(12, buf.length - 16)), decipher.final()]).toString("utf8");
  }
}
