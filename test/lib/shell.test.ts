/**
 * POSIX shell quoting (src/lib/shell.ts), read back by a real `sh`: each argument comes back as it
 * was, whatever it holds, and a plain word is left as it is so a suggested command stays readable.
 */
import { describe, expect, test } from "bun:test";
import { shellArg, shellLine } from "../../src/lib/shell.ts";

/** The arguments `sh` splits `line` into (printf prints each on its own line, NUL-separated). */
function asShellReadsThem(line: string): string[] {
  const r = Bun.spawnSync(["sh", "-c", `printf '%s\\0' ${line}`], { env: { PATH: process.env.PATH ?? "" } });
  expect(r.exitCode).toBe(0);
  return r.stdout.toString().split("\0").slice(0, -1);
}

const ODD = ["a b", "it's", "''", "$HOME", "`id`", "$(id)", "x;rm -rf /", 'say "hi"', "back\\slash", "new\nline", "*", "~", "-o", "", "é ü"];

describe("shellArg", () => {
  test("a plain word is left as it is", () => {
    for (const plain of ["/var/lib/runcell", "postgres://u@h:5432/db", "StrictHostKeyChecking=accept-new", "a,b+c%d"]) expect(shellArg(plain)).toBe(plain);
  });

  test.each(ODD)("%p comes back from sh as it was", (odd) => {
    expect(asShellReadsThem(shellArg(odd))).toEqual([odd]);
  });
});

describe("shellLine", () => {
  test("sh splits the line back into exactly the arguments given", () => {
    const argv = ["ssh", "-F", "/dev/null", "-o", "UserKnownHostsFile=/tmp/runcell-git-1 x/known_hosts", "-i", "/tmp/it's/id", ...ODD];
    expect(asShellReadsThem(shellLine(argv))).toEqual(argv);
  });
});
