/**
 * The API documents and their viewer: GET /v1/openapi.json, GET /v1/asyncapi.json and GET /docs are
 * public (the scenario table's success rows; they sit under /v1/ but need no credential, and a bad
 * one is not looked at); the OpenAPI document is generated from the route schemas; /docs renders
 * offline; pages carry the anti-framing headers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { VERSION } from "../../../src/version.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api } from "../../helpers/users.ts";

let t: TestApp;
let a: Actors;
let spec: any;
beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
  spec = await (await t.fetch("/v1/openapi.json")).json();
});
afterAll(() => t.stop());

// The two documents are under /v1/, where the helper would expect a user: they are public.
routeTable("API documents", () => a, [
  {
    route: "GET /v1/openapi.json",
    surface: "public",
    success: 200,
    check: (r) => {
      expect(r.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(r.body).toMatchObject({ openapi: "3.1.0", info: { title: "runcell API", version: VERSION }, servers: [{ url: t.config.publicUrl }] });
    },
  },
  {
    route: "GET /v1/asyncapi.json",
    surface: "public",
    success: 200,
    check: (r) => {
      expect(r.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(r.body.asyncapi).toMatch(/^3\./);
      expect(r.body.info.version).toBe(VERSION);
    },
  },
  {
    route: "GET /docs",
    success: 200,
    check: (r) => {
      // A view of the dashboard's app, under its CSP (rendered in Chromium by test/web/).
      expect(r.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(r.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(r.body).toContain('<div id="app">');
    },
  },
]);

test("a credential is not looked at on the documents: a bad token, a user's token or the admin password get the same answer", async () => {
  for (const path of ["/v1/openapi.json", "/v1/asyncapi.json", "/docs"]) {
    const anonymous = await api(t, "GET", path);
    for (const headers of [{ authorization: "Bearer rc_not-a-token" }, { cookie: "runcell.session_token=not-a-session" }, a.headers("owner"), a.headers("admin")]) {
      const r = await api(t, "GET", path, headers);
      expect(r.status, `${path} with ${JSON.stringify(headers)}`).toBe(200);
      expect(r.body).toEqual(anonymous.body);
    }
  }
});

describe("OpenAPI document", () => {
  test("is generated from the route schemas: every resource, no trailing slashes", () => {
    expect(spec.openapi).toBe("3.1.0");
    for (const p of ["/v1/api-tokens", "/v1/api-tokens/{id}", "/v1/tasks", "/v1/tasks/{id}/cancel", "/v1/sessions/{id}/events", "/v1/profiles", "/api/auth/sign-in/email", "/healthz"]) {
      expect(Object.keys(spec.paths)).toContain(p);
    }
    expect(Object.keys(spec.paths).filter((p) => p.length > 1 && p.endsWith("/"))).toEqual([]);
  });

  test("is a valid OpenAPI 3.1 document (the OpenAPI Initiative's schema, as code generators read it)", async () => {
    const { Validator } = await import("@seriousme/openapi-schema-validator");
    const result = await new Validator().validate(structuredClone(spec));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  test("bodiless answers have no content; a file download is bytes; the error body is one component", () => {
    expect(spec.paths["/v1/api-tokens/{id}"].delete.responses["204"]).toEqual({ description: expect.any(String) });
    const download = spec.paths["/v1/workspaces/{id}/files/{path}"].get;
    expect(Object.keys(download.responses["200"].content)).toEqual(["*/*"]);
    expect(download.parameters.map((p: { name: string }) => p.name)).toEqual(["id", "path"]);
    expect(spec.components.schemas.Error.required).toEqual(["error", "code"]);
    expect(JSON.stringify(spec)).not.toContain('"$id"');
    expect(spec.paths["/v1/profiles"].get.responses["401"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Error" });
  });

  test("a nullable enum accepts null (a task's trigger)", () => {
    const trigger = spec.paths["/v1/tasks/{id}"].get.responses["200"].content["application/json"].schema.properties.trigger;
    expect(trigger.enum).toEqual(["manual", "schedule", "hook", null]);
  });

  test("the pipeline's answers are documented where they apply: 413 and 400 wherever a body is read (a body not JSON is 400 like any bad input), never 415, 403 on cookie writes, 429 on the limited surfaces", () => {
    const ops = Object.entries(spec.paths as Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>>).flatMap(([path, o]) =>
      Object.entries(o).map(([method, op]) => ({ path, method, op })),
    );
    for (const { path, method, op } of ops) {
      const codes = Object.keys(op.responses);
      if (op.requestBody || method !== "get") expect([path, method, codes]).toEqual([path, method, expect.arrayContaining(["413", "400"])]);
      expect(codes).not.toContain("415");
      if (method !== "get") expect([path, method, codes]).toEqual([path, method, expect.arrayContaining(["400"])]);
      if (method !== "get" && path.startsWith("/v1/")) expect([path, method, codes]).toEqual([path, method, expect.arrayContaining(["403"])]);
      if (/^\/(v1|api|admin|hooks|files|metrics)(\/|$)/.test(path)) expect([path, method, codes]).toEqual([path, method, expect.arrayContaining(["429"])]);
    }
    expect(spec.paths["/metrics"].get.responses["200"].content).toHaveProperty(["text/plain; version=0.0.4; charset=utf-8"]);
  });

  test("every list's ?limit= documents its default, 20 (applied by the services, not the route's schema), and no x-default is left", () => {
    const lists = Object.entries(spec.paths as Record<string, Record<string, { parameters?: { name: string; in: string; schema: { default?: unknown } }[] }>>)
      .flatMap(([path, ops]) => (ops.get?.parameters ?? []).filter((p) => p.in === "query" && p.name === "limit").map((p) => [path, p.schema.default] as const));
    expect(lists.length).toBeGreaterThanOrEqual(12);
    // (a transcript's page size is in its description; a directory listing's default is 100)
    const other: Record<string, unknown> = { "/v1/sessions/{id}/events": undefined, "/v1/workspaces/{id}/files": 100 };
    for (const [path, fallback] of lists) expect([path, fallback]).toEqual([path, path in other ? other[path] : 20]);
    expect(JSON.stringify(spec)).not.toContain("x-default");
  });

  test("what the server takes is what the document says: null-as-absent submit fields are nullable, optional bodies not required, sign-in and sign-up open", () => {
    const task = spec.paths["/v1/tasks"].post.requestBody.content["application/json"].schema;
    for (const f of ["profile_id", "session_id", "max_turns", "max_budget_usd", "repositories"]) expect([f, task.properties[f].type]).toEqual([f, [expect.any(String), "null"]]);
    expect(task.properties.mode.enum).toEqual(["session", null]);
    expect(task.properties.prompt.type).toBe("string");
    expect(JSON.stringify(spec)).not.toContain("x-null-as-absent");
    for (const path of ["/v1/playbooks/{id}/run", "/hooks/playbooks/{id}/{secret}"]) expect([path, spec.paths[path].post.requestBody.required]).toEqual([path, false]);
    expect(spec.paths["/v1/tasks"].post.requestBody.required).toBe(true);
    for (const path of ["/api/auth/sign-in/email", "/api/auth/sign-up/email"]) {
      expect([path, spec.paths[path].post.requestBody.content["application/json"].schema.additionalProperties]).toEqual([path, true]);
    }
  });

  test("JSON request bodies carry their schema", () => {
    const body = spec.paths["/v1/api-tokens"].post.requestBody.content["application/json"].schema;
    expect(body.properties.name.type).toBe("string");
    const task = spec.paths["/v1/tasks"].post.requestBody.content["application/json"].schema;
    expect(task.required).toContain("prompt");
  });

  test("/docs works offline: its only scripts are this origin's hashed assets", async () => {
    const html = await (await t.fetch("/docs")).text();
    const srcs = [...html.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1]!);
    expect(srcs.length).toBeGreaterThan(0);
    for (const src of srcs) {
      expect(src).toMatch(/^\/assets\/[\w-]+\.js$/);
      expect((await t.fetch(src)).status).toBe(200);
    }
    expect(html).not.toMatch(/<script>/);
  });
});

test("pages are served with anti-framing and referrer headers; JSON with nosniff", async () => {
  for (const path of ["/", "/docs", "/setup"]) {
    const r = await t.fetch(path);
    expect(r.headers.get("x-frame-options")).toBe("DENY");
    expect(r.headers.get("x-content-type-options")).toBe("nosniff");
    expect(r.headers.get("referrer-policy")).toBeTruthy();
  }
  expect((await t.fetch("/healthz")).headers.get("x-content-type-options")).toBe("nosniff");
});
