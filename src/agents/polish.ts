/**
 * `turn.done.result_text`: the model's final text with markdown normalised (LF line endings, no
 * trailing spaces, runs of blank lines collapsed, unclosed code fences closed) and every image
 * reference to a workspace file — `![alt](chart.png)`, `![alt](<my chart.png>)`,
 * `![alt](/workspace/chart.png)`, a reference-style image's definition (`![alt][c]` … `[c]: chart.png`),
 * `<img src="…">` or `<img src=…>` — rewritten to a signed URL. Images hosted elsewhere, paths the
 * signer refuses and anything inside code (fenced blocks, inline code spans) are left alone.
 * Streamed `task:token` text stays raw. (Line by line, CommonMark's rules for destinations, escapes
 * and code spans: a markdown parser gives no offsets to rewrite the text in place.)
 */

/** Returns the signed URL for a path relative to /workspace, or null to leave it untouched (it may throw: the link is then left as well). */
export type Signer = (relativePath: string) => string | null;

const FENCE = /^\s{0,3}(`{3,}|~{3,})/;

/** Fenced code blocks, line by line: `code(line)` says whether a line belongs to one (its fences included); `open` is the fence not closed yet. */
class Fences {
  open: string | null = null;

  code(line: string): boolean {
    const m = FENCE.exec(line);
    if (this.open) {
      if (m && m[1]![0] === this.open[0] && m[1]!.length >= this.open.length && line.trim() === m[1]) this.open = null;
      return true;
    }
    if (m) this.open = m[1]!;
    return m !== null;
  }
}

/** A workspace-relative path for an image reference, or null when it is not a workspace file. */
export function workspaceRelative(ref: string): string | null {
  const target = ref.trim().replace(/^<|>$/g, "");
  if (!target || /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//") || target.startsWith("#")) return null;
  let path = target.split(/[?#]/)[0]!;
  try {
    path = decodeURI(path);
  } catch {
    return null;
  }
  if (path.startsWith("/workspace/")) path = path.slice("/workspace/".length);
  else if (path.startsWith("/")) return null;
  path = path.replace(/^(\.\/)+/, "");
  const parts: string[] = [];
  for (const seg of path.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") {
      if (!parts.length) return null;
      parts.pop();
    } else parts.push(seg);
  }
  return parts.length ? parts.join("/") : null;
}

/**
 * The signed URL for an image reference, or null to leave it as written: not a workspace file, or
 * a path the signer refuses (a NUL byte, longer than the workspace allows…) — a bad link in the
 * answer never fails a finished task.
 */
function signedRef(ref: string, sign: Signer): string | null {
  const rel = workspaceRelative(ref);
  if (!rel) return null;
  try {
    return sign(rel);
  } catch {
    return null;
  }
}

/** CommonMark's backslash escapes (of ASCII punctuation), taken out of a link destination. */
const unescape = (s: string) => s.replace(/\\([!-/:-@[-`{-~])/g, "$1");

/**
 * An image's link destination: `<…>` (no line break or `<`/`>` inside), or plain — no spaces or
 * control characters, backslash escapes allowed, parentheses balanced one level deep.
 */
const DEST = String.raw`<[^<>\n]*>|(?:[^\s()\\<]|\\[\s\S]|\((?:[^\s()\\]|\\[\s\S])*\))+`;
const TITLE = String.raw`"(?:[^"\\]|\\[\s\S])*"|'(?:[^'\\]|\\[\s\S])*'|\((?:[^()\\]|\\[\s\S])*\)`;
const LABEL = String.raw`(?:[^\[\]\\]|\\[\s\S])*`;
const INLINE_IMAGE = new RegExp(String.raw`(!\[${LABEL}\]\(\s*)(${DEST})((?:\s+(?:${TITLE}))?\s*\))`, "g");
/** `![alt][label]`, `![label][]` and `![label]`: the label a reference-style image uses. */
const REF_IMAGE = new RegExp(String.raw`!\[(${LABEL})\](?:\[(${LABEL})\])?`, "g");
/** A link reference definition: `[label]: destination "title"`. */
const DEFINITION = new RegExp(String.raw`^( {0,3}\[(${LABEL})\]:[ \t]*)(${DEST})(.*)$`);
const IMG_QUOTED = /(<img\b[^>]*?\bsrc\s*=\s*)(["'])(.*?)\2/gi;
const IMG_UNQUOTED = /(<img\b[^>]*?\bsrc\s*=\s*)([^\s"'=<>`]+)/gi;

/** A reference label as CommonMark matches them: case-folded, inner whitespace collapsed. */
const labelKey = (label: string) => label.trim().replace(/\s+/g, " ").toLowerCase();

/**
 * A signed URL as a markdown destination: parentheses percent-encoded (the signed path is decoded
 * before it is checked), so a name like `par(1).png` cannot end the destination early; in `<…>`
 * when the reference was written that way.
 */
function asDestination(url: string, bracketed: boolean): string {
  const safe = url.replace(/\(/g, "%28").replace(/\)/g, "%29");
  return bracketed ? `<${safe}>` : safe;
}

/** The signed destination for a markdown destination as written, or null to leave it. */
function signedDestination(dest: string, sign: Signer): string | null {
  const bracketed = dest.startsWith("<");
  const url = signedRef(unescape(bracketed ? dest.slice(1, -1) : dest), sign);
  return url ? asDestination(url, bracketed) : null;
}

/** Applies `f` to the parts of `line` outside inline code spans (`…`, ``…``), which stay as written. */
function outsideCodeSpans(line: string, f: (text: string) => string): string {
  let out = "";
  let from = 0;
  let i = 0;
  while (i < line.length) {
    if (line[i] !== "`") {
      i++;
      continue;
    }
    let n = 1;
    while (line[i + n] === "`") n++;
    // The span ends at the next run of exactly n backticks; without one, the run is plain text.
    let end = -1;
    for (let j = i + n; j < line.length; ) {
      if (line[j] !== "`") {
        j++;
        continue;
      }
      let k = 1;
      while (line[j + k] === "`") k++;
      if (k === n) {
        end = j;
        break;
      }
      j += k;
    }
    if (end < 0) {
      i += n;
      continue;
    }
    out += f(line.slice(from, i)) + line.slice(i, end + n);
    from = i = end + n;
  }
  return out + f(line.slice(from));
}

function rewriteImages(line: string, sign: Signer, refs: ReadonlySet<string>): string {
  const def = refs.size ? DEFINITION.exec(line) : null;
  if (def && refs.has(labelKey(def[2]!))) {
    const url = signedDestination(def[3]!, sign);
    return url ? `${def[1]}${url}${def[4]}` : line;
  }
  return outsideCodeSpans(line, (text) =>
    text
      .replace(INLINE_IMAGE, (all, open: string, dest: string, close: string) => {
        const url = signedDestination(dest, sign);
        return url ? `${open}${url}${close}` : all;
      })
      .replace(IMG_QUOTED, (all, open: string, q: string, ref: string) => {
        const url = signedRef(ref, sign);
        return url ? `${open}${q}${url.replace(/&/g, "&amp;")}${q}` : all;
      })
      .replace(IMG_UNQUOTED, (all, open: string, ref: string) => {
        const url = signedRef(ref, sign);
        return url ? `${open}"${url.replace(/&/g, "&amp;")}"` : all;
      }),
  );
}

/** The labels reference-style images use (outside code), whose definitions are rewritten too. */
function imageLabels(lines: string[]): Set<string> {
  const labels = new Set<string>();
  const fences = new Fences();
  for (const line of lines) {
    if (fences.code(line)) continue;
    outsideCodeSpans(line, (text) => {
      for (const r of text.matchAll(REF_IMAGE)) {
        // An inline image `![a](…)` is not a reference.
        if (r[2] === undefined && text[r.index! + r[0].length] === "(") continue;
        labels.add(labelKey(r[2] || r[1]!));
      }
      return text;
    });
  }
  return labels;
}

export function polishResultText(text: string, sign: Signer): string {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const refs = imageLabels(lines);
  const out: string[] = [];
  const fences = new Fences();
  let blank = 0;
  for (const raw of lines) {
    const line = raw.replace(/[ \t]+$/, "");
    if (fences.code(line)) {
      blank = 0;
      out.push(line);
      continue;
    }
    if (line === "") {
      if (++blank > 1) continue;
    } else blank = 0;
    out.push(rewriteImages(line, sign, refs));
  }
  if (fences.open) out.push(fences.open);
  while (out.length && out[0] === "") out.shift();
  while (out.length && out[out.length - 1] === "") out.pop();
  return out.join("\n");
}
