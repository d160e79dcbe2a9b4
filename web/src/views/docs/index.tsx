/**
 * The API reference (/docs): rendered from /v1/openapi.json, grouped by tag, each operation a
 * collapsible card with its auth, parameters, request body and responses as TypeScript-like shapes.
 */
import { useEffect, useState } from "preact/hooks";
import { THead } from "../../components/table.tsx";
import "./docs.css";

type Schema = Record<string, any>;
interface Spec {
  info: { title: string; version: string; description?: string };
  tags?: { name: string }[];
  security?: Record<string, unknown>[];
  paths: Record<string, Record<string, Schema>>;
  components?: { schemas?: Record<string, Schema> };
}

function shapeOf(spec: Spec) {
  const resolve = (s: Schema | undefined, depth = 0): Schema | undefined => {
    if (!s || depth > 8) return s;
    if (s.$ref) {
      const name = String(s.$ref).split("/").pop()!;
      return resolve(spec.components?.schemas?.[name], depth + 1) ?? { title: name };
    }
    return s;
  };
  const shape = (raw: Schema | undefined, depth = 0): string => {
    const s = resolve(raw);
    if (!s || depth > 10) return "any";
    if (s.anyOf || s.oneOf) return (s.anyOf ?? s.oneOf).map((x: Schema) => shape(x, depth + 1)).join(" | ");
    // OpenAPI 3.1 nullable fields: `type: ["string", "null"]`.
    if (Array.isArray(s.type)) return s.type.map((ty: string) => (ty === "null" ? "null" : shape({ ...s, type: ty }, depth + 1))).join(" | ");
    if (s.enum) return s.enum.map((v: unknown) => JSON.stringify(v)).join(" | ");
    if (s.const !== undefined) return JSON.stringify(s.const);
    if (s.type === "array") return `${shape(s.items, depth + 1)}[]`;
    if (s.type === "object" || s.properties) {
      const req = new Set<string>(s.required ?? []);
      const props = Object.entries<Schema>(s.properties ?? {}).map(([k, v]) => `  ${k}${req.has(k) ? "" : "?"}: ${shape(v, depth + 1).replace(/\n/g, "\n  ")}`);
      if (s.additionalProperties && typeof s.additionalProperties === "object") props.push(`  [key: string]: ${shape(s.additionalProperties, depth + 1)}`);
      return props.length ? `{\n${props.join(",\n")}\n}` : "object";
    }
    return s.format ? `${s.type} (${s.format})` : (s.type ?? "any");
  };
  return shape;
}

function Operation({ spec, path, method, op, shape }: { spec: Spec; path: string; method: string; op: Schema; shape: (s?: Schema) => string }) {
  const security = (op.security ?? spec.security) as Record<string, unknown>[] | undefined;
  const body = op.requestBody?.content?.["application/json"]?.schema;
  return (
    <details class="op">
      <summary>
        <span class={`m ${method}`}>{method}</span>
        <code class="p">{path}</code>
        <span class="muted">{op.summary ?? ""}</span>
      </summary>
      <div class="body">
        {op.description && <p>{op.description}</p>}
        <p class="meta">{security?.length ? `Auth: ${security.map((s) => Object.keys(s)[0]).join(" or ")}` : "No authentication"}</p>
        {op.parameters?.length > 0 && (
          <table>
            <THead columns={["Parameter", "In", "Type"]} />
            <tbody>
              {op.parameters.map((p: Schema) => (
                <tr key={`${p.in}:${p.name}`}>
                  <td>
                    <code>{p.name + (p.required ? "" : "?")}</code>
                  </td>
                  <td>{p.in}</td>
                  <td>
                    <code>{shape(p.schema)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {body && (
          <>
            <h4>Request body (JSON)</h4>
            <pre>{shape(body)}</pre>
          </>
        )}
        {Object.entries<Schema>(op.responses ?? {}).map(([code, r]) => {
          const sch = r.content ? (Object.values(r.content)[0] as Schema | undefined)?.schema : undefined;
          return (
            <div key={code}>
              <h4>Response {code}</h4>
              {sch && <pre>{shape(sch)}</pre>}
            </div>
          );
        })}
      </div>
    </details>
  );
}

export function Docs() {
  const [spec, setSpec] = useState<Spec | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    fetch("/v1/openapi.json")
      .then((r) => r.json())
      .then(setSpec, (e) => setError(`Could not load the API description: ${String(e?.message ?? e)}`));
  }, []);
  if (!spec)
    return (
      <main id="main" tabIndex={-1} class="page">
        <h1>runcell API</h1>
        <p class={error ? "error" : "muted"} role={error ? "alert" : "status"}>
          {error || "Loading /v1/openapi.json…"}
        </p>
      </main>
    );
  const shape = shapeOf(spec);
  const groups = new Map<string, { path: string; method: string; op: Schema }[]>();
  for (const [path, ops] of Object.entries(spec.paths ?? {}))
    for (const [method, op] of Object.entries(ops)) {
      const tag = op.tags?.[0] ?? "Other";
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag)!.push({ path, method, op });
    }
  const order = (spec.tags ?? []).map((t) => t.name);
  const rank = (t: string) => order.indexOf(t) + 1 || 99;
  const tags = [...groups.keys()].sort((a, b) => rank(a) - rank(b));
  const anchor = (tag: string) => `tag-${tag.replace(/\W+/g, "-")}`;
  return (
    <main id="main" tabIndex={-1} class="docs">
      <header class="page">
        <h1 id="title">
          {spec.info.title} {spec.info.version}
        </h1>
        <p class="muted">{spec.info.description}</p>
        <p class="meta">
          REST: <a href="/v1/openapi.json">/v1/openapi.json</a> (OpenAPI 3) · WebSocket stream <code>/v1/stream</code>:{" "}
          <a href="/v1/asyncapi.json">/v1/asyncapi.json</a> (AsyncAPI 3)
        </p>
      </header>
      <div class="docs-body">
        <nav aria-label="API sections">
          {tags.map((t) => (
            <a key={t} href={`#${anchor(t)}`}>
              {t}
            </a>
          ))}
        </nav>
        <div>
          {tags.map((t) => (
            <section key={t} id={anchor(t)}>
              <h2>{t}</h2>
              {groups.get(t)!.map((o) => (
                <Operation key={`${o.method} ${o.path}`} spec={spec} shape={shape} {...o} />
              ))}
            </section>
          ))}
        </div>
      </div>
    </main>
  );
}
