/**
 * The error-shape table of the foundation, on a real socket: the real pipeline and router with a
 * small route module that exercises body parsing, validation and an unexpected failure.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { t } from "elysia";
import { parseArgs, resolveConfig } from "../../src/config.ts";
import { createPipeline } from "../../src/http/pipeline.ts";
import { RateLimiter } from "../../src/lib/ratelimit.ts";
import { createRouter } from "../../src/http/router.ts";
import { routeOptions } from "../../src/http/route-options.ts";
import { jsonBody, PageQuery } from "../../src/http/schema.ts";
import { createLogger } from "../../src/log.ts";
import { tempDir } from "../helpers/app.ts";

const logs: string[] = [];
let server: ReturnType<typeof Bun.serve>;
let base = "";

beforeAll(() => {
  const config = resolveConfig(parseArgs(["--data-dir", tempDir(), "--http", "127.0.0.1:0"]).flags, {});
  const log = createLogger({ level: "debug", sink: (l) => logs.push(l) });
  const router = createRouter(log)
    .post("/v1/things", ({ body }) => ({ ok: true, body }), jsonBody(t.Object({ name: t.String({ minLength: 1 }), size: t.Optional(t.Integer({ minimum: 1 })), config: t.Optional(t.Object({ url: t.String() })) })))
    .get("/v1/things", ({ query }) => ({ data: [], limit: query.limit }), { query: t.Object(PageQuery) })
    // Routes that take no body (a cancel, a delete): the router refuses a body with fields.
    .post("/v1/things/:id/poke", ({ params }) => ({ poked: params.id }))
    .delete("/v1/things/:id", ({ set }) => void (set.status = 204))
    // A route that reads its body itself (as a trigger URL does), and one under /hooks/ that does not:
    // the route's declaration decides, not its path.
    .use(routeOptions)
    .post("/v1/things/:id/raw", async ({ request, body }) => ({ router: body, raw: await request.text() }), { ownBody: true })
    .post("/hooks/things", ({ body }) => ({ body }), jsonBody(t.Object({ name: t.String() })))
    .get("/v1/boom", () => {
      throw new Error("SQLITE_ERROR: near SELECT password_hash FROM users");
    });
  const pipeline = createPipeline({
    config,
    log,
    limiter: new RateLimiter(1e6, 1e6),
    // A request with "Authorization: Bearer test" is a signed-in caller; anything else is anonymous.
    authenticate: async (req) =>
      req.headers.get("authorization") === "Bearer test"
        ? { principal: { user: { id: "usr_test", email: "t@example.com", name: "t", role: "user", created_at: 0 }, via: "token", tokenId: "tok_test" }, error: "missing" }
        : { principal: null, error: "missing" },
    handle: (req) => router.handle(req),
  });
  server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: pipeline as never, maxRequestBodySize: 8 * 1024 * 1024 });
  base = `http://127.0.0.1:${server.port}`;
});
afterAll(() => server.stop(true));

const AUTH = { authorization: "Bearer test" };
const post = (body: BodyInit | null, headers: Record<string, string> = { "content-type": "application/json" }) =>
  fetch(base + "/v1/things", { method: "POST", body, headers: { ...AUTH, ...headers } });

describe("error shape", () => {
  test.each([
    ["unknown route", () => fetch(base + "/v1/nope", { headers: AUTH }), 404, "NOT_FOUND", undefined],
    ["wrong method", () => fetch(base + "/v1/things", { method: "DELETE", headers: AUTH }), 404, "NOT_FOUND", undefined],
    ["unknown route, anonymous: the credential first", () => fetch(base + "/v1/nope"), 401, "UNAUTHORIZED", undefined],
    ["wrong method, anonymous", () => fetch(base + "/v1/things", { method: "DELETE" }), 401, "UNAUTHORIZED", undefined],
    ["malformed JSON", () => post("{not json"), 400, "VALIDATION_FAILED", "body"],
    ["missing field", () => post("{}"), 400, "VALIDATION_FAILED", "name"],
    ["wrong type", () => post('{"name":"a","size":"big"}'), 400, "VALIDATION_FAILED", "size"],
    ["out of range", () => post('{"name":"a","size":0}'), 400, "VALIDATION_FAILED", "size"],
    ["nested field", () => post('{"name":"a","config":{"url":5}}'), 400, "VALIDATION_FAILED", "config.url"],
    ["unknown field", () => post('{"name":"a","sise":3}'), 400, "VALIDATION_FAILED", "sise"],
    ["unknown nested field", () => post('{"name":"a","config":{"url":"x","secert":"y"}}'), 400, "VALIDATION_FAILED", "config.secert"],
    ["JSON array instead of object", () => post("[1,2]"), 400, "VALIDATION_FAILED", "body"],
    ["bytes that are not UTF-8 (not turned into U+FFFD)", () => post(new Uint8Array([...Buffer.from('{"name":"'), 0xff, 0xfe, ...Buffer.from('"}')])), 400, "VALIDATION_FAILED", "body"],
    ["empty body", () => post(null, {}), 400, "VALIDATION_FAILED", "body"],
    ["form content type", () => post("name=a", { "content-type": "application/x-www-form-urlencoded" }), 400, "VALIDATION_FAILED", "content-type"],
    ["text content type", () => post('{"name":"a"}', { "content-type": "text/plain" }), 400, "VALIDATION_FAILED", "content-type"],
    ["body over 1 MiB", () => post(JSON.stringify({ name: "x".repeat(1024 * 1024) })), 413, "VALIDATION_FAILED", "body"],
    ["chunked body over 1 MiB", () => post(new Blob(["{\"name\":\"", "y".repeat(1100 * 1024), "\"}"]).stream() as never), 413, "VALIDATION_FAILED", "body"],
    ["query out of range", () => fetch(base + "/v1/things?limit=500", { headers: AUTH }), 400, "VALIDATION_FAILED", "limit"],
    ["query wrong type", () => fetch(base + "/v1/things?limit=abc", { headers: AUTH }), 400, "VALIDATION_FAILED", "limit"],
    // An integer in a query is decimal digits only: not what JavaScript's Number() also reads.
    ...(["1e1", "0x10", "%201", "1%20", "+1", "1.0", "-1", "0b1", "", "１"] as const).map(
      (v) => [`limit=${v}`, () => fetch(base + `/v1/things?limit=${v}`, { headers: AUTH }), 400, "VALIDATION_FAILED", "limit"] as const,
    ),
    // A page parameter given twice is refused, whichever comes first (not the last one taken).
    ["limit=500&limit=1", () => fetch(base + "/v1/things?limit=500&limit=1", { headers: AUTH }), 400, "VALIDATION_FAILED", "limit"],
    ["limit=1&limit=500", () => fetch(base + "/v1/things?limit=1&limit=500", { headers: AUTH }), 400, "VALIDATION_FAILED", "limit"],
    ["lim%69t=1&limit=1 (an encoded name)", () => fetch(base + "/v1/things?lim%69t=1&limit=1", { headers: AUTH }), 400, "VALIDATION_FAILED", "limit"],
    ["cursor twice", () => fetch(base + "/v1/things?cursor=a&limit=2&cursor=b", { headers: AUTH }), 400, "VALIDATION_FAILED", "cursor"],
  ] as const)("%s → %d %s", async (_name, send, status, code, field) => {
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(res.headers.get("x-request-id")).toMatch(/^req_/);
    const body = (await res.json()) as { error: string; code: string; details?: { field?: string } };
    expect(typeof body.error).toBe("string");
    expect(body.error.length).toBeGreaterThan(0);
    expect(body.code).toBe(code);
    if (field) expect(body.details?.field).toBe(field);
  });

  test("malformed JSON: the parser's reason, never the text it stumbled on (an unquoted secret or password stays out of the answer)", async () => {
    for (const [body, reason] of [
      ['{"name":"a","value":sk_live_abcdef123}', "Unexpected identifier"],
      ['{"password":Hunter2Password }', "Unexpected identifier"],
      ['{"name":"a","x":"\\qsecret"}', "Invalid escape character"],
      ['{"name":"a",}', "Property name must be a string literal"],
    ] as const) {
      const res = await post(body);
      expect(res.status).toBe(400);
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ error: `Malformed JSON body: ${reason}`, code: "VALIDATION_FAILED", details: { field: "body" } });
      for (const secret of ["sk_live", "Hunter2", "qsecret"]) expect(text).not.toContain(secret);
    }
  });

  test("a route that takes no body refuses one with fields (400 on the first, worded as a closed body's), a non-object, and nothing else", async () => {
    const poke = (body: BodyInit | null, headers: Record<string, string> = { "content-type": "application/json" }, method = "POST") =>
      fetch(base + (method === "POST" ? "/v1/things/t1/poke" : "/v1/things/t1"), { method, body, headers: { ...AUTH, ...headers } });
    for (const method of ["POST", "DELETE"]) {
      const refused = await poke('{"reason":"x","force":true}', undefined, method);
      expect(refused.status).toBe(400);
      expect(await refused.json()).toEqual({ error: 'Unknown field "reason"', code: "VALIDATION_FAILED", details: { field: "reason", reason: "unknown field" } });
      for (const body of ["[]", '"x"', "1", "true"]) {
        const r = await poke(body, undefined, method);
        expect([method, body, r.status]).toEqual([method, body, 400]);
        expect((await r.json()).details.field).toBe("body");
      }
      // No body, an empty one (with or without a JSON type), {} and JSON null are no body.
      for (const [body, headers] of [[null, {}], ["", {}], ["", undefined], ["{}", undefined], [" { } ", undefined], ["null", undefined]] as const) {
        const r = await poke(body, headers, method);
        expect([method, body, r.status]).toEqual([method, body, method === "POST" ? 200 : 204]);
      }
    }
    // The same body on a route that takes one is that route's to check (it has no "reason" either).
    expect((await post('{"name":"a","reason":"x"}')).status).toBe(400);
  });

  test("a route declaring ownBody gets its body unread, whatever it is; a route without it is read by the router, /hooks/ or not", async () => {
    for (const [body, type] of [["{not json", "application/json"], ["name=a", "application/x-www-form-urlencoded"], ["x".repeat(2 * 1024 * 1024), "text/plain"], ["", "application/json"]] as const) {
      const r = await fetch(base + "/v1/things/t1/raw", { method: "POST", body, headers: { ...AUTH, "content-type": type } });
      expect([type, r.status]).toEqual([type, 200]);
      expect(await r.json()).toEqual({ router: null, raw: body });
    }
    // …and the credential still comes first.
    expect((await fetch(base + "/v1/things/t1/raw", { method: "POST", body: "{not json" })).status).toBe(401);
    const hooks = (body: string, type = "application/json") => fetch(base + "/hooks/things", { method: "POST", body, headers: { "content-type": type } });
    expect(await (await hooks('{"name":"a"}')).json()).toEqual({ body: { name: "a" } });
    expect((await hooks("{not json")).status).toBe(400);
    expect((await hooks("name=a", "application/x-www-form-urlencoded")).status).toBe(400);
    expect((await hooks('{"name":"a","zzz":1}')).status).toBe(400);
  });

  test("an anonymous caller gets 401 before anything about the body", async () => {
    for (const body of ["{not json", "name=a"]) {
      const res = await fetch(base + "/v1/things", { method: "POST", body, headers: { "content-type": "application/x-www-form-urlencoded" } });
      expect(res.status).toBe(401);
      expect((await res.json()).code).toBe("UNAUTHORIZED");
    }
  });

  test("success passes through with X-Request-Id", async () => {
    const res = await post('{"name":"ok","size":2}');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, body: { name: "ok", size: 2 } });
    const q = await fetch(base + "/v1/things?limit=7", { headers: AUTH });
    expect(await q.json()).toEqual({ data: [], limit: 7 });
    for (const [query, limit] of [["limit=007", 7], ["limit=100", 100], ["limit=1&cursor=x", 1], ["", undefined]] as const) {
      const r = await fetch(base + `/v1/things?${query}`, { headers: AUTH });
      expect([query, r.status, await r.json()]).toEqual([query, 200, { data: [], limit }]);
    }
  });

  test("an unexpected failure is 500 INTERNAL_ERROR with the request id, never the cause", async () => {
    const res = await fetch(base + "/v1/boom", { headers: AUTH });
    expect(res.status).toBe(500);
    const id = res.headers.get("x-request-id")!;
    const text = await res.text();
    expect(text).not.toContain("SQLITE");
    expect(text).not.toContain("password_hash");
    expect(text).not.toContain("at ");
    expect(JSON.parse(text)).toEqual({ error: `Internal server error (request ${id})`, code: "INTERNAL_ERROR", details: { request_id: id } });
    // The operator still sees the cause, tied to the request id.
    expect(logs.some((l) => l.includes(id) && l.includes("SQLITE_ERROR"))).toBe(true);
  });

  test("a sane caller-supplied X-Request-Id is kept; a hostile one is replaced", async () => {
    const kept = await fetch(base + "/v1/nope", { headers: { "x-request-id": "trace-12345678" } });
    expect(kept.headers.get("x-request-id")).toBe("trace-12345678");
    const replaced = await fetch(base + "/v1/nope", { headers: { "x-request-id": "<script>" } });
    expect(replaced.headers.get("x-request-id")).toMatch(/^req_/);
  });
});

test("every response has nosniff; HTML pages also refuse framing", async () => {
  const json = await fetch(base + "/v1/nope");
  expect(json.headers.get("x-content-type-options")).toBe("nosniff");
});
