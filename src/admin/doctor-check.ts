/** The `runcell doctor` check of the admin password (registered in src/cli/doctor.ts). */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "../app.ts";
import type { Check } from "../cli/doctor.ts";
import type { Config } from "../config.ts";
import { openDatabase } from "../db/client.ts";
import { ADMIN_PASSWORD_MIN } from "./password.ts";

const NAME = "admin password";
const FIX = "run `runcell admin set-password`, or start serve with --admin-password-file FILE or RUNCELL_ADMIN_PASSWORD";

export function adminPasswordCheck(config: Config): Check {
  if (config.adminPasswordFile) {
    let text: string;
    try {
      text = readFileSync(config.adminPasswordFile, "utf8").replace(/\r?\n$/, "");
    } catch (e) {
      return { name: NAME, ok: false, detail: `cannot read ${config.adminPasswordFile}: ${(e as Error).message}`, fix: "create the file (chmod 600) or drop --admin-password-file" };
    }
    if (text.length < ADMIN_PASSWORD_MIN) {
      return { name: NAME, ok: false, detail: `${config.adminPasswordFile} holds fewer than ${ADMIN_PASSWORD_MIN} characters`, fix: "put a longer password in it" };
    }
    return { name: NAME, ok: true, detail: `set from ${config.adminPasswordFile} at start` };
  }
  if (config.adminPassword) {
    if (config.adminPassword.length < ADMIN_PASSWORD_MIN) {
      return { name: NAME, ok: false, detail: `RUNCELL_ADMIN_PASSWORD has fewer than ${ADMIN_PASSWORD_MIN} characters`, fix: "use a longer password" };
    }
    return { name: NAME, ok: true, detail: "set from RUNCELL_ADMIN_PASSWORD at start" };
  }
  const path = join(config.dataDir, DB_FILE);
  let stored = false;
  if (existsSync(path)) {
    try {
      const handle = openDatabase(path, { readonly: true });
      try {
        stored = !!handle.sqlite.query("SELECT 1 FROM settings WHERE key = 'admin_password_hash'").get();
      } finally {
        handle.close();
      }
    } catch {
      stored = false;
    }
  }
  if (stored) return { name: NAME, ok: true, detail: "set (argon2id hash in the database)" };
  return { name: NAME, ok: false, detail: "none is set: every /admin/* call and /metrics answer 401", fix: FIX };
}
