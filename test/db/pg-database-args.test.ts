/**
 * The database arguments of a suggested command (`run runcell migrate …`), from the configuration
 * as the CLI resolves it: pasteable as they are, and never the URL's password — the environment's
 * variable, the data dir whose runcell.toml names the database, the URL when it holds no secret, or
 * the one thing to fill in. Run through a real shell, they name the database that was configured.
 * (The refusals that print them: test/pg/cli.test.ts.)
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs, resolveConfig } from "../../src/config.ts";
import { databaseArgs } from "../../src/db/pg/database-args.ts";
import { tempDir } from "../helpers/app.ts";

const WITH_PASSWORD = "postgres://runcell:pw-never-printed@db.internal:5432/runcell";
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const config = (argv: string[], env: Record<string, string> = {}) => resolveConfig(parseArgs(argv).flags, env, ["data-dir", "database"]);

/** What `sh -c 'printf "%s\n" <args>'` makes of the arguments, with `env`: the words a pasted command gets. */
function asShellReadsThem(args: string, env: Record<string, string> = {}): string[] {
  const r = Bun.spawnSync(["sh", "-c", `printf '%s\\n' ${args}`], { env: { PATH: process.env.PATH ?? "", ...env } });
  return r.stdout.toString().trimEnd().split("\n");
}

describe("databaseArgs", () => {
  test("RUNCELL_DATABASE_URL: the variable, expanded by the shell to the configured URL", () => {
    const dir = tempDir();
    dirs.push(dir);
    const env = { RUNCELL_DATABASE_URL: WITH_PASSWORD };
    const args = databaseArgs(config(["--data-dir", dir], env));
    expect(args).toBe('--database "$RUNCELL_DATABASE_URL"');
    expect(asShellReadsThem(args, env)).toEqual(["--database", WITH_PASSWORD]);
  });

  test("runcell.toml: the data dir (quoted when it needs it), whose file the command reads itself", () => {
    const dir = join(tempDir(), "data dir's");
    dirs.push(dir);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "runcell.toml"), `database = "${WITH_PASSWORD}"\n`);
    const c = config(["--data-dir", dir]);
    expect(c.databaseUrl).toBe(WITH_PASSWORD);
    const args = databaseArgs(c);
    expect(args).not.toContain("pw-never-printed");
    expect(asShellReadsThem(args)).toEqual(["--data-dir", dir]);
    // Pointed at that data dir again, the configuration names the same database.
    expect(config(asShellReadsThem(args)).databaseUrl).toBe(WITH_PASSWORD);
  });

  test("--database: the URL when it holds no secret; else the one thing to fill in, never the password", () => {
    const plain = "postgres://runcell@db.internal:5432/runcell?sslmode=require";
    expect(asShellReadsThem(databaseArgs(config(["--database", plain])))).toEqual(["--database", plain]);
    const secret = databaseArgs(config(["--database", WITH_PASSWORD]));
    expect(secret).toBe("--database <the URL you gave --database>");
    const inOptions = databaseArgs(config(["--database", "postgres://runcell@db.internal/runcell?password=pw-never-printed"]));
    expect(inOptions).not.toContain("pw-never-printed");
  });
});
