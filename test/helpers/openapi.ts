/**
 * Every answer the scenario tables get is checked against the server's own OpenAPI document, as a
 * client generated from it would read it: the status is documented for the operation, and a JSON
 * body validates (ajv, JSON Schema 2020-12, OpenAPI 3.1's dialect) against the documented schema.
 */
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import type { TestApp } from "./app.ts";

/** Pages, their assets (/assets/*) and the documents themselves: served, deliberately not operations of the API. */
const UNDOCUMENTED = new Set(["/", "/setup", "/docs", "/v1/openapi.json", "/v1/asyncapi.json"]);

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}
interface Checker {
  doc: { paths: Record<string, Record<string, Operation>> };
  ajv: Ajv2020;
  /** Document paths as patterns, literal ones first (`/v1/secrets/x` is `{name}`, `/v1/me` is itself). */
  patterns: { path: string; re: RegExp }[];
}

const checkers = new WeakMap<TestApp, Promise<Checker>>();

async function checkerFor(t: TestApp): Promise<Checker> {
  const doc = (await (await t.fetch("/v1/openapi.json")).json()) as Checker["doc"] & Record<string, unknown>;
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  ajv.addSchema(doc as object, "openapi");
  const patterns = Object.keys(doc.paths)
    .map((path) => ({
      path,
      re: new RegExp(`^${path.replace(/[.+?^$()|[\]\\]/g, "\\$&").replace(/\/\{path\}$/, "/.+").replace(/\{[^}]+\}/g, "[^/]+")}$`),
      literal: !path.includes("{"),
    }))
    .sort((a, b) => Number(b.literal) - Number(a.literal));
  return { doc, ajv, patterns };
}

/** JSON Pointer escaping of one reference token. */
const token = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");

/**
 * Throws when `res` (the answer to `method path`) is not what the document says the operation
 * answers: an undocumented operation or status, or a JSON body its schema refuses.
 */
export async function expectDocumented(t: TestApp, method: string, path: string, res: { status: number; headers: Headers; body: unknown }): Promise<void> {
  const bare = path.split("?")[0]!;
  if (UNDOCUMENTED.has(bare) || bare.startsWith("/assets/")) return;
  const c = await (checkers.get(t) ?? checkers.set(t, checkerFor(t)).get(t)!);
  const m = method.toLowerCase() === "head" ? "get" : method.toLowerCase();
  const found = c.patterns.find((p) => p.re.test(bare) && c.doc.paths[p.path]![m]);
  if (!found) {
    // A path no operation has (a malformed id that does not decode, a method the route lacks) is the router's 404.
    if (res.status === 404 || res.status === 401) return;
    throw new Error(`${method} ${bare}: no operation in the OpenAPI document answers it (status ${res.status})`);
  }
  const op = c.doc.paths[found.path]![m]!;
  const documented = op.responses[String(res.status)];
  if (!documented) throw new Error(`${method} ${found.path}: status ${res.status} is not documented (documented: ${Object.keys(op.responses).join(", ")})`);
  const type = res.headers.get("content-type") ?? "";
  if (!type.includes("json") || res.body === null || m === "head") return;
  if (!documented.content?.["application/json"]) throw new Error(`${method} ${found.path} ${res.status}: a JSON body where the document lists ${Object.keys(documented.content ?? {}).join(", ") || "no body"}`);
  const pointer = `openapi#/paths/${token(found.path)}/${m}/responses/${res.status}/content/${token("application/json")}/schema`;
  const validate = c.ajv.getSchema(pointer);
  if (!validate) throw new Error(`${pointer}: no schema`);
  if (!validate(res.body)) {
    throw new Error(`${method} ${found.path} ${res.status}: the body does not match the documented schema: ${c.ajv.errorsText(validate.errors)}\n${JSON.stringify(res.body).slice(0, 500)}`);
  }
}
