/**
 * `runcell token create --email E --name N`: mints an API token for an existing account on the
 * data dir's database. The token alone goes to stdout (so `TOKEN=$(runcell token create …)`
 * works); what was created goes to stderr. It is shown only this once.
 */
import { Audit } from "../admin/audit.ts";
import { ApiTokens } from "../auth/tokens.ts";
import { Users } from "../auth/users.ts";
import { type Command, failUsage, UsageError } from "./command.ts";
import { withDataDir } from "./open-db.ts";
import { parseStateArgs, resolveStateConfig, STATE_FLAGS } from "./state-config.ts";

async function create(argv: string[]): Promise<number> {
  const cmd = "token create";
  let config;
  let email: string;
  let name: string;
  try {
    const args = parseStateArgs(argv, cmd, { email: true, name: true });
    if (args.positionals.length) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
    const e = args.extra.get("email");
    const n = args.extra.get("name");
    if (typeof e !== "string" || !e) throw new UsageError("--email is required");
    if (typeof n !== "string" || !n) throw new UsageError("--name is required (a label such as \"ci\" or \"laptop\")");
    email = e;
    name = n;
    config = resolveStateConfig(args.flags);
  } catch (e) {
    return failUsage(cmd, e);
  }
  return withDataDir(config, cmd, async (db) => {
    const user = await new Users(db, Date.now).byEmail(email);
    if (!user) {
      process.stderr.write(`runcell ${cmd}: no account uses ${email.trim().toLowerCase()}\n`);
      return 1;
    }
    if (user.disabled) {
      process.stderr.write(`runcell ${cmd}: ${user.email} is disabled; enable it first (PATCH /admin/users/${user.id})\n`);
      return 1;
    }
    const created = await new ApiTokens(db, Date.now, undefined, new Audit(db, Date.now)).create(user.id, name, { actor: "admin", via: "cli" });
    process.stdout.write(created.token + "\n");
    process.stderr.write(`created API token ${created.id} "${created.name}" for ${user.email}; it is shown only this once\n`);
  }, { existing: true });
}

export const tokenCommand: Command = {
  name: "token",
  summary: "Create an API token for an account (printed once).",
  usage: "runcell token create --email E --name N [flags]",
  details: `create       mint an rc_ token for the account with this email
  --email E  the account (required)
  --name N   a label for the token, shown by GET /v1/api-tokens (required)
The token is written alone to stdout; the summary goes to stderr.`,
  examples: ["runcell token create --email you@example.com --name laptop", "export RUNCELL_TOKEN=$(runcell token create --email ci@example.com --name ci --data-dir /var/lib/runcell)"],
  configFlags: STATE_FLAGS,
  async run(argv) {
    const [sub, ...rest] = argv;
    if (sub === "create") return create(rest);
    process.stderr.write(sub ? `runcell token: unknown subcommand "${sub}" (expected create)\n` : "runcell token: expected a subcommand: create\n");
    return 2;
  },
};
