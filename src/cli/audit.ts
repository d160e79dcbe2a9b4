/**
 * `runcell audit [--user-id U] [--action A] [--limit N] [--json]`: the audit log from the data
 * dir's database, newest first — one line per row (time, actor, user, action, target, ip), or
 * with --json one JSON record per line (GET /admin/audit's records, details included).
 */
import { Audit, type AuditRecord } from "../admin/audit.ts";
import { AUDIT_ACTIONS } from "../schema/audit.ts";
import { type Command, failUsage, UsageError } from "./command.ts";
import { withDataDir } from "./open-db.ts";
import { parseStateArgs, resolveStateConfig, STATE_FLAGS } from "./state-config.ts";

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 100_000;
const PAGE = 1000;

/** One aligned text line: time, actor, user, action, target, ip ("-" where there is none). */
export function auditLine(r: AuditRecord): string {
  return [r.at, r.actor.padEnd(9), (r.user_id ?? "-").padEnd(30), r.action.padEnd(24), (r.target_id ?? "-").padEnd(30), r.ip ?? "-"].join("  ").trimEnd();
}

export const auditCommand: Command = {
  name: "audit",
  summary: "Print the audit log (sign-ins, tokens, roles, secrets by name, settings…), newest first.",
  usage: "runcell audit [--user-id U] [--action A] [--limit N] [--json] [flags]",
  details: `  --user-id U  only rows of this user (acting, or acted on)
  --action A   only this action (auth.sign_in, auth.sign_in_failed, token.created, user.role_changed…)
  --limit N    at most N rows (default ${DEFAULT_LIMIT})
  --json       one JSON record per line, with details, instead of the table
Columns: time, actor (user, admin, system, anonymous), user, action, target, ip.`,
  examples: [
    "runcell audit --data-dir /var/lib/runcell",
    "runcell audit --action auth.sign_in_failed --limit 20",
    "runcell audit --user-id usr_01jd4x0v9k8m2n3p4q5r6s7t8v --json | jq .details",
  ],
  configFlags: STATE_FLAGS,
  async run(argv) {
    const cmd = "audit";
    let config;
    let userId: string | undefined;
    let action: string | undefined;
    let limit = DEFAULT_LIMIT;
    let json = false;
    try {
      const args = parseStateArgs(argv, cmd, { "user-id": true, action: true, limit: true, json: false });
      if (args.positionals.length) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
      const u = args.extra.get("user-id");
      const a = args.extra.get("action");
      const l = args.extra.get("limit");
      userId = typeof u === "string" && u ? u : undefined;
      action = typeof a === "string" && a ? a : undefined;
      // Refused like GET /admin/audit?action= does, rather than printing that nothing matches.
      if (action !== undefined && !(AUDIT_ACTIONS as readonly string[]).includes(action)) throw new UsageError(`--action: expected one of ${AUDIT_ACTIONS.join(", ")}, got "${action}"`);
      if (l !== undefined) {
        if (typeof l !== "string" || !/^\d+$/.test(l) || Number(l) < 1 || Number(l) > MAX_LIMIT) throw new UsageError(`--limit: expected an integer from 1 to ${MAX_LIMIT}, got "${l}"`);
        limit = Number(l);
      }
      json = args.extra.get("json") === true;
      config = resolveStateConfig(args.flags);
    } catch (e) {
      return failUsage(cmd, e);
    }
    return withDataDir(config, cmd, async (db) => {
      const audit = new Audit(db, Date.now);
      let printed = 0;
      let cursor: string | undefined;
      const out: string[] = [];
      while (printed < limit) {
        const page = await audit.list({ user_id: userId, action, limit: Math.min(PAGE, limit - printed), cursor });
        for (const r of page.data) out.push(json ? JSON.stringify(r) : auditLine(r));
        printed += page.data.length;
        if (!page.next_cursor) break;
        cursor = page.next_cursor;
      }
      if (out.length) process.stdout.write(out.join("\n") + "\n");
      else process.stderr.write("no audit log rows match\n");
    }, { existing: true });
  },
};
