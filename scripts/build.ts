/**
 * Builds the single executable dist/runcell: `bun build --compile` of src/main.ts with the
 * migrations and the web dashboard embedded (they are imported as text), bytecode for a faster
 * cold start, and the git commit baked in for `runcell version`.
 */
import { mkdirSync } from "node:fs";

const outfile = process.argv[2] ?? "dist/runcell";
const commit = (() => {
  const r = Bun.spawnSync(["git", "rev-parse", "--short=12", "HEAD"], { stderr: "ignore" });
  const sha = r.success ? r.stdout.toString().trim() : "";
  if (!sha) return "unknown";
  const dirty = Bun.spawnSync(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.toString().trim();
  return dirty ? `${sha}-dirty` : sha;
})();

// The dashboard first: src/http/routes/web.ts embeds web/dist/bundle.json.
const web = Bun.spawnSync(["bun", "run", "scripts/build-web.ts"], { stdout: "inherit", stderr: "inherit" });
if (!web.success) {
  console.error("build failed: the dashboard did not build");
  process.exit(1);
}

mkdirSync("dist", { recursive: true });
const started = performance.now();
const proc = Bun.spawnSync(
  ["bun", "build", "--compile", "--bytecode", "--minify-syntax", "--minify-whitespace", "--sourcemap=inline",
   `--define=RUNCELL_COMMIT=${JSON.stringify(commit)}`, "src/main.ts", "--outfile", outfile],
  { stdout: "inherit", stderr: "inherit" },
);
if (!proc.success) {
  console.error("build failed");
  process.exit(1);
}
const size = Bun.file(outfile).size;
console.log(`built ${outfile} (${(size / 1e6).toFixed(1)} MB, commit ${commit}) in ${Math.round(performance.now() - started)} ms`);
