import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError, parseArgs, resolveConfig } from "../src/config.ts";
import { tempDir } from "./helpers/app.ts";

const resolve = (argv: string[], env: Record<string, string> = {}) => resolveConfig(parseArgs(argv).flags, env);

describe("config", () => {
  test("defaults", () => {
    const dir = tempDir();
    const c = resolve(["--data-dir", dir]);
    expect(c.host).toBe("127.0.0.1");
    expect(c.port).toBe(7420);
    expect(c.publicUrl).toBe("http://127.0.0.1:7420");
    expect(c.signup).toBe("closed");
    expect(c.rateLimit).toEqual({ perMinute: 60, burst: 10 });
    expect(c.defaultMaxConcurrency).toBe(5);
    expect(c.webhook).toEqual({ attempts: 3, backoffMs: [5000, 15000, 45000], timeoutMs: 10000 });
    expect(c.workspaceIdleTimeoutMs).toBe(30 * 60_000);
    expect(c.dockerTimeoutMs).toBe(60_000);
    expect(c.downloadSpoolMb).toBe(1024);
    expect(resolve(["--data-dir", dir, "--download-spool-mb", "64"]).downloadSpoolMb).toBe(64);
    expect(resolve(["--data-dir", dir, "--docker-timeout", "2s"]).dockerTimeoutMs).toBe(2000);
    expect(c.github).toBeNull();
    expect(resolve([]).dataDir).toEndWith("/runcell_data");
  });

  test("precedence: flags > RUNCELL_* env > data-dir file > defaults", () => {
    const dir = tempDir();
    writeFileSync(join(dir, "runcell.json"), JSON.stringify({ signup: "open", rate_limit_per_minute: 30, rate_limit_burst: 3, log_level: "warn" }));
    const fileOnly = resolve(["--data-dir", dir]);
    expect(fileOnly.signup).toBe("open");
    expect(fileOnly.rateLimit).toEqual({ perMinute: 30, burst: 3 });
    const envOverFile = resolve(["--data-dir", dir], { RUNCELL_RATE_LIMIT_PER_MINUTE: "40", RUNCELL_LOG_LEVEL: "error" });
    expect(envOverFile.rateLimit.perMinute).toBe(40);
    expect(envOverFile.logLevel).toBe("error");
    expect(envOverFile.rateLimit.burst).toBe(3);
    const flagOverEnv = resolve(["--data-dir", dir, "--rate-limit-per-minute=50", "--signup", "closed"], { RUNCELL_RATE_LIMIT_PER_MINUTE: "40" });
    expect(flagOverEnv.rateLimit.perMinute).toBe(50);
    expect(flagOverEnv.signup).toBe("closed");
  });

  test("the data dir itself comes from the flag or the environment", () => {
    const a = tempDir();
    const b = tempDir();
    expect(resolve([], { RUNCELL_DATA_DIR: a }).dataDir).toBe(a);
    expect(resolve(["--data-dir", b], { RUNCELL_DATA_DIR: a }).dataDir).toBe(b);
  });

  test("TOML file", () => {
    const dir = tempDir();
    writeFileSync(join(dir, "runcell.toml"), 'http = "0.0.0.0:9000"\nwebhook_backoff = "1s,2s"\ntrust_proxy = true\n');
    const c = resolve(["--data-dir", dir]);
    expect(c.host).toBe("0.0.0.0");
    expect(c.port).toBe(9000);
    expect(c.publicUrl).toBe("http://localhost:9000");
    expect(c.webhook.backoffMs).toEqual([1000, 2000]);
    expect(c.trustProxy).toBe(true);
  });

  test("a URL setting is kept as the URL parser writes it: an upper-case scheme or host is https/lower-case everywhere", () => {
    const c = resolve(["--public-url", "HTTPS://Agents.Example.COM/"]);
    expect(c.publicUrl).toBe("https://agents.example.com");
  });

  test.each([
    [["--bogus"], /unknown flag --bogus/],
    [["--http", "nope"], /--http: expected host:port/],
    [["--http", "1.2.3.4:99999"], /--http: expected host:port/],
    [["--signup", "maybe"], /--signup: expected one of closed, open/],
    [["--rate-limit-burst", "0"], /--rate-limit-burst: must be at least 1/],
    [["--rate-limit-burst", "ten"], /--rate-limit-burst: expected an integer/],
    [["--public-url", "ftp://x"], /--public-url: expected an http\(s\) URL/],
    [["--public-url", "http://user:pw@example.com"], /--public-url: the URL must not hold a user name or password, got "http:\/\/…@example.com"/],
    [["--workspace-idle-timeout", "soon"], /--workspace-idle-timeout: expected a duration/],
    [["--docker-timeout", "500ms"], /--docker-timeout: must be at least/],
    [["--webhook-timeout", "30d"], /--webhook-timeout: must be at most/],
    [["--shutdown-timeout", "30d"], /--shutdown-timeout: must be at most/],
    [["--docker-timeout", "2h"], /--docker-timeout: must be at most 30m/],
    [["--replica-lease", "1h"], /--replica-lease: must be at most 10m/],
    [["--data-dir"], /--data-dir needs a value/],
    [["--github-client-id", "abc"], /github sign-in needs both/],
  ])("rejects %p", (argv, message) => {
    expect(() => resolve(argv as string[])).toThrow(message);
  });

  test("bad values from env and file name their origin", () => {
    const dir = tempDir();
    expect(() => resolve(["--data-dir", dir], { RUNCELL_SIGNUP: "x" })).toThrow(/RUNCELL_SIGNUP: expected one of/);
    writeFileSync(join(dir, "runcell.json"), JSON.stringify({ sigup: "open" }));
    expect(() => resolve(["--data-dir", dir])).toThrow(/unknown setting "sigup"/);
    writeFileSync(join(dir, "runcell.json"), "{not json");
    expect(() => resolve(["--data-dir", dir])).toThrow(ConfigError);
  });

  test("booleans and command flags", () => {
    const a = parseArgs(["--trust-proxy", "--no-allow-private-webhooks", "--stdin", "pos"], { stdin: false });
    expect(a.flags.get("trust-proxy")).toBe(true);
    expect(a.flags.get("allow-private-webhooks")).toBe(false);
    expect(a.extra.get("stdin")).toBe(true);
    expect(a.positionals).toEqual(["pos"]);
  });
});
