/**
 * Builds the dashboard (web/src, Preact + TSX) with Bun's bundler into content-hashed assets and
 * writes web/dist/bundle.json: the index page (with the hashed <script>/<link> tags) and each
 * asset's text. src/http/routes/web.ts imports that file, so the dashboard is embedded in the
 * binary. Prints each asset's size and the gzipped JavaScript total against the 80 KB budget.
 * Usage: bun run scripts/build-web.ts [--if-stale]  (--if-stale: skip when bundle.json is newer than web/)
 */
import { mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..");
const OUT = join(ROOT, "web/dist/bundle.json");
export const JS_BUDGET_GZIP = 80 * 1024;

function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== "dist") t = Math.max(t, newest(p));
    } else t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

export interface WebBundle {
  index: string;
  assets: Record<string, { type: string; body: string }>;
}

export async function buildWeb(opts: { quiet?: boolean } = {}): Promise<WebBundle> {
  const started = performance.now();
  const result = await Bun.build({
    entrypoints: [join(ROOT, "web/src/main.tsx")],
    naming: { entry: "[name]-[hash].[ext]", asset: "[name]-[hash].[ext]", chunk: "[name]-[hash].[ext]" },
    minify: true,
    target: "browser",
    sourcemap: "none",
    define: { "process.env.NODE_ENV": '"production"' },
  });
  if (!result.success) {
    for (const log of result.logs) console.error(log);
    throw new Error("the dashboard build failed");
  }
  const assets: WebBundle["assets"] = {};
  const tags: string[] = [];
  let jsGzip = 0;
  const lines: string[] = [];
  for (const out of result.outputs) {
    const name = out.path.replace(/^.*\//, "");
    const body = await out.text();
    const type = name.endsWith(".css") ? "text/css; charset=utf-8" : "text/javascript; charset=utf-8";
    assets[name] = { type, body };
    const gz = Bun.gzipSync(new TextEncoder().encode(body)).length;
    if (name.endsWith(".js")) {
      jsGzip += gz;
      if (out.kind === "entry-point") tags.push(`<script type="module" src="/assets/${name}"></script>`);
    } else tags.unshift(`<link rel="stylesheet" href="/assets/${name}">`);
    lines.push(`  ${name}: ${(body.length / 1024).toFixed(1)} KB, ${(gz / 1024).toFixed(1)} KB gzipped`);
  }
  const template = await Bun.file(join(ROOT, "web/src/index.html")).text();
  const bundle: WebBundle = { index: template.replace("<!--assets-->", tags.join("\n")), assets };
  mkdirSync(join(ROOT, "web/dist"), { recursive: true });
  writeFileSync(OUT, JSON.stringify(bundle));
  if (!opts.quiet) {
    console.log(`dashboard built in ${Math.round(performance.now() - started)} ms:`);
    for (const l of lines) console.log(l);
    const pct = Math.round((jsGzip / JS_BUDGET_GZIP) * 100);
    console.log(`  JavaScript: ${(jsGzip / 1024).toFixed(1)} KB gzipped of the 80 KB budget (${pct}%)${jsGzip > JS_BUDGET_GZIP ? " — OVER BUDGET" : ""}`);
  }
  return bundle;
}

/** Whether web/dist/bundle.json is missing or older than a file under web/ (the sources). */
export function webIsStale(): boolean {
  try {
    return statSync(OUT).mtimeMs < newest(join(ROOT, "web"));
  } catch {
    return true;
  }
}

if (import.meta.main) {
  if (process.argv.includes("--if-stale") && !webIsStale()) process.exit(0);
  const bundle = await buildWeb();
  const js = Object.entries(bundle.assets).filter(([n]) => n.endsWith(".js"));
  const gz = js.reduce((n, [, a]) => n + Bun.gzipSync(new TextEncoder().encode(a.body)).length, 0);
  if (gz > JS_BUDGET_GZIP) {
    console.error(`the dashboard's JavaScript is over its budget: ${(gz / 1024).toFixed(1)} KB gzipped > 80 KB`);
    process.exit(1);
  }
}
