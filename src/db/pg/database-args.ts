/**
 * How a message that suggests a command (`run runcell migrate …`) names the configured PostgreSQL
 * database so that the suggestion can be pasted as it is, while the URL's password never reaches
 * the output: by the place the operator set it (src/config.ts records it in Config.sources).
 *
 * - RUNCELL_DATABASE_URL: `--database "$RUNCELL_DATABASE_URL"` (the shell fills it in);
 * - the data dir's runcell.toml|json: `--data-dir DIR` (the command reads the file there itself);
 * - --database, with no secret in the URL: the URL itself;
 * - --database with a password: `--database <the URL you gave --database>`, the one thing to fill in.
 */
import type { Config } from "../../config.ts";
import { shellArg } from "../../lib/shell.ts";

/** Whether printing the URL could show a secret: a password in it, or one among its options. */
function holdsSecret(url: string): boolean {
  try {
    const u = new URL(url);
    return !!u.password || /(^|[?&])(password|sslpassword)=/i.test(u.search);
  } catch {
    return true;
  }
}

/**
 * The arguments that point a suggested `runcell …` command at `config`'s PostgreSQL database, e.g.
 * `--database "$RUNCELL_DATABASE_URL"`.
 */
export function databaseArgs(config: Pick<Config, "databaseUrl" | "dataDir" | "sources">): string {
  const source = config.sources?.database;
  if (source === "RUNCELL_DATABASE_URL") return `--database "$RUNCELL_DATABASE_URL"`;
  if (source && source !== "--database") return `--data-dir ${shellArg(config.dataDir)}`;
  if (config.databaseUrl && !holdsSecret(config.databaseUrl)) return `--database ${shellArg(config.databaseUrl)}`;
  return "--database <the URL you gave --database>";
}
