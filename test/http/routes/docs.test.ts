import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";

let t: TestApp;
let spec: any;
beforeAll(async () => {
  t = await startTestApp();
  spec = await (await t.fetch("/v1/openapi.json")).json();
});
afterAll(() => t.stop());

describe("OpenAPI document", () => {
  test("is generated from the route schemas: every resource, no trailing slashes", () => {
    expect(spec.openapi).toBe("3.0.3");
    for (const p of ["/v1/api-tokens", "/v1/api-tokens/{id}", "/v1/tasks", "/v1/tasks/{id}/cancel", "/v1/sessions/{id}/events", "/v1/profiles", "/api/auth/sign-in/email", "/healthz"]) {
      expect(Object.keys(spec.paths)).toContain(p);
    }
    expect(Object.keys(spec.paths).filter((p) => p.length > 1 && p.endsWith("/"))).toEqual([]);
  });

  test("JSON request bodies carry their schema", () => {
    const body = spec.paths["/v1/api-tokens"].post.requestBody.content["application/json"].schema;
    expect(body.properties.name.type).toBe("string");
    const task = spec.paths["/v1/tasks"].post.requestBody.content["application/json"].schema;
    expect(task.required).toContain("prompt");
  });

  test("/docs renders it offline (no external scripts)", async () => {
    const html = await (await t.fetch("/docs")).text();
    expect(html).toContain("/v1/openapi.json");
    expect(html).not.toMatch(/<script[^>]+src=/);
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
