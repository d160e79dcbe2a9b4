import { describe, expect, test } from "bun:test";
import { DrizzleQueryError } from "drizzle-orm";
import { createLogger, redact, redactString } from "../src/log.ts";

describe("log", () => {
  test("JSON lines with levels; below the minimum is dropped", () => {
    const lines: string[] = [];
    const log = createLogger({ level: "info", sink: (l) => lines.push(l) });
    log.debug("hidden");
    log.info("shown", { a: 1 });
    log.child({ request_id: "r1" }).error("boom", { err: new Error("bad") });
    expect(lines).toHaveLength(2);
    const [a, b] = lines.map((l) => JSON.parse(l));
    expect(a).toMatchObject({ level: "info", msg: "shown", a: 1 });
    expect(a.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(b).toMatchObject({ level: "error", msg: "boom", request_id: "r1", err: { name: "Error", message: "bad" } });
  });

  test("credentials are redacted by key and by shape", () => {
    const token = "rc_" + "ab".repeat(32);
    const out = JSON.stringify(
      redact({
        password: "hunter22",
        headers: { authorization: "Bearer " + token, cookie: "runcell.session_token=abc" },
        url: `/v1/stream?token=${token}&x=1`,
        note: `used ${token} here`,
        client_secret: "s3cr3t",
        input_tokens: 12,
        max_output_tokens: 8192,
        cache_read_input_tokens: 7,
        session_token: "cookie-value-1",
        session_id: "sess_01hx",
        nested: [{ api_key: "sk-live-1" }],
      }),
    );
    for (const secret of ["hunter22", token, "abc", "s3cr3t", "sk-live-1", "cookie-value-1"]) expect(out).not.toContain(secret);
    expect(out).toContain('"input_tokens":12');
    // Token counts are not credentials (the cut-off answer's log line promises max_output_tokens).
    expect(out).toContain('"max_output_tokens":8192');
    expect(out).toContain('"cache_read_input_tokens":7');
    // Ids are not credentials: a session's id stays readable, so that its log lines can be followed.
    expect(out).toContain('"session_id":"sess_01hx"');
    expect(out).toContain("x=1");
    expect(redactString("GET /setup#abcDEF123")).toBe("GET /setup#[redacted]");
    expect(redactString("POST /x?sig=deadbeef&exp=1")).toBe("POST /x?sig=[redacted]&exp=1");
  });

  test("a failed statement is logged without its parameters (row values), with the driver's error", () => {
    const lines: string[] = [];
    const log = createLogger({ level: "debug", sink: (l) => lines.push(l) });
    const cause = new Error('duplicate key value violates unique constraint "users_email_unique"');
    log.error("request failed", { err: new DrizzleQueryError('insert into "users" ("email", "password_hash") values ($1, $2)', ["a@example.com", "hash-s3cret-value"], cause) });
    const line = JSON.parse(lines[0]!);
    expect(lines[0]).not.toContain("hash-s3cret-value");
    expect(lines[0]).not.toContain("a@example.com");
    expect(line.err.message).toBe('Failed query: insert into "users" ("email", "password_hash") values ($1, $2)');
    expect(line.err.cause.message).toContain("users_email_unique");
  });
});

