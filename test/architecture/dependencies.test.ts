/**
 * The dependency rule of src/ (README "Architecture"), checked on the import graph:
 *
 *   main → cli → app → http, ws → services (the catalogue type) → domain → schema → db → lib
 *
 * where domain = auth, agents, workspaces, notifications, vault, admin, events, playbooks, mcp, git, replicas and lib =
 * lib/ plus config.ts, log.ts, version.ts. A file may import from its own layer's other modules or
 * from layers to its right, never to its left (so no domain file reaches into http/ or ws/); and
 * there is no cycle, neither between modules (folders) nor between files. Type-only imports count:
 * they couple as much as the others.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dir, "../../src");

const LAYER: Record<string, number> = {
  main: 0,
  cli: 1,
  app: 2,
  http: 3,
  ws: 3,
  services: 4,
  auth: 5,
  agents: 5,
  workspaces: 5,
  notifications: 5,
  vault: 5,
  admin: 5,
  events: 5,
  playbooks: 5,
  mcp: 5,
  git: 5,
  replicas: 5,
  schema: 6,
  db: 7,
  lib: 8,
  config: 8,
  log: 8,
  version: 8,
  types: 8,
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : /\.tsx?$/.test(n) ? [p] : [];
  });
}

/** The module of a file: its top folder under src/, or its name for a root file. */
export function moduleOf(file: string): string {
  const rel = relative(SRC, file);
  const top = rel.split("/")[0]!;
  return rel.includes("/") ? top : top.replace(/(\.d)?\.tsx?$/, "");
}

const IMPORT = /(?:import|export)\s+(?:type\s+)?(?:[^"';]*?\s+from\s+)?["']([^"']+)["']|(?:require|import)\(\s*["']([^"']+)["']\s*\)/g;

/** Relative imports of a file, resolved to files under src/ (packages and assets are skipped). */
export function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8").replace(/^\s*\/\/.*$/gm, "").replace(/\/\*[\s\S]*?\*\//g, "");
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2]!;
    if (!spec.startsWith(".")) continue;
    const target = resolve(dirname(file), spec);
    if (target.startsWith(SRC + "/") && /\.tsx?$/.test(target)) out.push(target);
  }
  return out;
}

/** Strongly connected components with more than one node (Tarjan), each sorted. */
export function cycles(graph: Map<string, Set<string>>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) out.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

const all = files(SRC);
const fileGraph = new Map(all.map((f) => [f, new Set(importsOf(f))]));
const rel = (f: string) => relative(SRC, f);

describe("dependencies point one way", () => {
  test("every file belongs to a known layer", () => {
    const unknown = [...new Set(all.map(moduleOf))].filter((m) => LAYER[m] === undefined);
    expect(unknown).toEqual([]);
  });

  test("no import points to a layer on the left (no domain file imports http/ or ws/)", () => {
    const upward: string[] = [];
    for (const [from, targets] of fileGraph) {
      for (const to of targets) {
        const a = moduleOf(from);
        const b = moduleOf(to);
        if (LAYER[b]! < LAYER[a]!) upward.push(`${rel(from)} → ${rel(to)}`);
      }
    }
    expect(upward).toEqual([]);
  });

  test("no cycle between modules", () => {
    const g = new Map<string, Set<string>>();
    for (const [from, targets] of fileGraph) {
      const a = moduleOf(from);
      if (!g.has(a)) g.set(a, new Set());
      for (const to of targets) if (moduleOf(to) !== a) g.get(a)!.add(moduleOf(to));
    }
    expect(cycles(g)).toEqual([]);
  });

  test("no cycle between files", () => {
    expect(cycles(fileGraph).map((c) => c.map(rel))).toEqual([]);
  });

  test("the checker finds what it must (a cycle, an upward import)", () => {
    const g = new Map([["a", new Set(["b"])], ["b", new Set(["c"])], ["c", new Set(["a"])], ["d", new Set(["a"])]]);
    expect(cycles(g)).toEqual([["a", "b", "c"]]);
    expect(moduleOf(join(SRC, "agents/loop.ts"))).toBe("agents");
    expect(moduleOf(join(SRC, "app.ts"))).toBe("app");
    expect(LAYER[moduleOf(join(SRC, "http/errors.ts"))]!).toBeLessThan(LAYER.agents!);
  });
});
