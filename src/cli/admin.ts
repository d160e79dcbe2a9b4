/**
 * `runcell admin set-password [--stdin]` and `runcell admin create-user --email E [--name N]
 * [--role admin|user] [--password-stdin]`: operator tasks done on the data dir's database
 * directly (a running server sees the change at once). Both are audited (actor admin, via cli).
 */
import { join } from "node:path";
import { Audit } from "../admin/audit.ts";
import { AdminPassword } from "../admin/password.ts";
import { Users } from "../auth/users.ts";
import { randomToken } from "../lib/crypto.ts";
import { DB_FILE } from "../db/data-dir.ts";
import { redactDatabaseUrl } from "../db/pg/client.ts";
import { Settings } from "../db/settings.ts";
import { type Command, failUsage, readStdin, UsageError } from "./command.ts";
import { withDataDir } from "./open-db.ts";
import { parseStateArgs, resolveStateConfig, STATE_FLAGS } from "./state-config.ts";
import { promptHidden } from "./prompt.ts";

const SUBCOMMANDS = "set-password, create-user";

async function setPassword(argv: string[]): Promise<number> {
  const cmd = "admin set-password";
  let config;
  let fromStdin = false;
  try {
    const args = parseStateArgs(argv, cmd, { stdin: false });
    if (args.positionals.length) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
    fromStdin = args.extra.get("stdin") === true;
    config = resolveStateConfig(args.flags);
  } catch (e) {
    return failUsage(cmd, e);
  }
  let password: string;
  try {
    if (fromStdin) password = await readStdin();
    else {
      password = await promptHidden("New admin password (at least 12 characters): ");
      const again = await promptHidden("Repeat it: ");
      if (again !== password) {
        process.stderr.write(`runcell ${cmd}: the two passwords differ; nothing changed\n`);
        return 1;
      }
    }
  } catch (e) {
    return failUsage(cmd, e);
  }
  return withDataDir(config, cmd, async (db) => {
    await new AdminPassword(new Settings(db), Date.now, undefined, new Audit(db, Date.now)).set(password, { actor: "admin", via: "cli" });
    // Where the hash went: PostgreSQL holds it when --database is set, the data dir then holds no copy.
    const where = config.databaseUrl ? redactDatabaseUrl(config.databaseUrl) : join(config.dataDir, DB_FILE);
    console.log(`admin password set (argon2id hash stored in ${where}); use it as "Authorization: Bearer <password>" on /admin/*`);
  });
}

async function createUser(argv: string[]): Promise<number> {
  const cmd = "admin create-user";
  let config;
  let email: string;
  let name: string | undefined;
  let role: "admin" | "user" | undefined;
  let passwordFromStdin = false;
  try {
    const args = parseStateArgs(argv, cmd, { email: true, name: true, role: true, "password-stdin": false });
    if (args.positionals.length) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
    const e = args.extra.get("email");
    if (typeof e !== "string" || !e) throw new UsageError("--email is required");
    email = e;
    const n = args.extra.get("name");
    name = typeof n === "string" ? n : undefined;
    const r = args.extra.get("role");
    if (r !== undefined && r !== "admin" && r !== "user") throw new UsageError(`--role: expected admin or user, got "${r}"`);
    role = r;
    passwordFromStdin = args.extra.get("password-stdin") === true;
    config = resolveStateConfig(args.flags);
  } catch (e) {
    return failUsage(cmd, e);
  }
  // Without --password-stdin: 18 random bytes, 24 base64url characters (144 bits), printed once.
  const generated = !passwordFromStdin;
  const password = generated ? randomToken(18) : await readStdin();
  return withDataDir(config, cmd, async (db) => {
    const users = new Users(db, Date.now, new Audit(db, Date.now));
    // Without --role, the server's first account is its admin (as the setup link makes it); later ones are users.
    let first = role === undefined && (await users.count()) === 0;
    let user = await users.create({ email, name, password, role: role ?? (first ? "admin" : "user"), emailVerified: true }, { actor: "admin", via: "cli" });
    // Several made at once on an empty server all counted none: only the one made first (ids are
    // time-ordered) stays the admin.
    if (first && (await users.firstId()) !== user.id) {
      await users.update(user.id, { role: "user" });
      user = { ...user, role: "user" };
      first = false;
    }
    console.log(`created user ${user.id} ${user.email} (role ${user.role}${first ? ": the server's first account" : ""})`);
    if (generated) {
      console.log(`password: ${password}`);
      console.log("This password is shown only once: store it now.");
    }
  });
}

export const adminCommand: Command = {
  name: "admin",
  summary: "Operator tasks on the database: set the /admin password, create an account.",
  usage: "runcell admin set-password [--stdin] [flags]\n  runcell admin create-user --email E [--name N] [--role admin|user] [--password-stdin] [flags]",
  details: `set-password     store the /admin bearer password (argon2id; at least 12 characters)
  --stdin          read it from stdin instead of prompting (without echo) on the terminal
create-user      create an account directly (the CLI way to make the first admin)
  --email E        the account's email (required; trimmed and lower-cased)
  --name N         display name (default: the part of the email before @)
  --role R         admin or user (default: admin for the server's first account, as the
                   setup link makes it; user after that)
  --password-stdin read the password from stdin; without it a strong password is generated
                   and printed once`,
  examples: [
    "runcell admin set-password",
    "printf '%s' \"$ADMIN_PASSWORD\" | runcell admin set-password --stdin --data-dir /var/lib/runcell",
    "runcell admin create-user --email you@example.com --role admin",
    "printf '%s' 'a long passphrase' | runcell admin create-user --email bob@example.com --name Bob --password-stdin",
  ],
  configFlags: STATE_FLAGS,
  async run(argv) {
    const [sub, ...rest] = argv;
    if (sub === "set-password") return setPassword(rest);
    if (sub === "create-user") return createUser(rest);
    process.stderr.write(sub ? `runcell admin: unknown subcommand "${sub}" (expected ${SUBCOMMANDS})\n` : `runcell admin: expected a subcommand: ${SUBCOMMANDS}\n`);
    return 2;
  },
};
