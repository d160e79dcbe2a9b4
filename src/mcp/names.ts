/**
 * The names MCP tools reach the model under: `mcp__<server>__<tool>`, reduced to what every
 * provider accepts (`^[A-Za-z0-9_-]{1,64}$`): other characters become `_`, and a name that is too
 * long, or that two tools would share, ends in a short hash of the original. `allowed_tools`
 * patterns select among those names.
 */
import { glob } from "../lib/glob.ts";
import { sha256Hex } from "../lib/crypto.ts";

export const MCP_PREFIX = "mcp__";
const MAX = 64;

const clean = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, "_");

/** The model-facing name of `tool` of `server`, unique within `taken` (which it joins). */
export function modelToolName(server: string, tool: string, taken: Set<string>): string {
  const plain = `${MCP_PREFIX}${clean(server)}__${clean(tool)}`;
  let name = plain;
  // A hashed name can be taken too (a third tool of the same name): the next hash, until one is free.
  for (let n = 0; name.length > MAX || taken.has(name); n++) name = `${plain.slice(0, MAX - 9)}_${sha256Hex(`${server}\0${tool}${n ? `\0${n}` : ""}`).slice(0, 8)}`;
  taken.add(name);
  return name;
}

export const isMcpToolName = (name: string) => name.startsWith(MCP_PREFIX);


/**
 * Which names `allowed_tools` offers: with no include pattern every name is included; then every
 * `!pattern` removes the names it matches.
 */
export function toolFilter(patterns: string[]): (name: string) => boolean {
  const include = patterns.filter((p) => !p.startsWith("!")).map(glob);
  const exclude = patterns.filter((p) => p.startsWith("!")).map((p) => glob(p.slice(1)));
  return (name) => (include.length === 0 || include.some((r) => r.test(name))) && !exclude.some((r) => r.test(name));
}
