/**
 * `turn.done.result_text`: the model's final text with markdown normalised (LF line endings, no
 * trailing spaces, runs of blank lines collapsed, unclosed code fences closed) and every image
 * reference to a workspace file — `![alt](chart.png)`, `![alt](/workspace/chart.png)`,
 * `<img src="…">` — rewritten to a signed URL. Images hosted elsewhere, paths the signer refuses and
 * anything inside code fences are left alone. Streamed `task:token` text stays raw.
 */

/** Returns the signed URL for a path relative to /workspace, or null to leave it untouched (it may throw: the link is then left as well). */
export type Signer = (relativePath: string) => string | null;

const FENCE = /^\s{0,3}(`{3,}|~{3,})/;

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

function rewriteImages(line: string, sign: Signer): string {
  const md = line.replace(/(!\[[^\]]*\]\()(\s*<?[^)\s>]+>?)((?:\s+"[^"]*")?\s*\))/g, (all, open: string, ref: string, close: string) => {
    const url = signedRef(ref, sign);
    return url ? `${open}${url}${close}` : all;
  });
  return md.replace(/(<img\b[^>]*?\bsrc\s*=\s*)(["'])(.*?)\2/gi, (all, open: string, q: string, ref: string) => {
    const url = signedRef(ref, sign);
    return url ? `${open}${q}${url.replace(/&/g, "&amp;")}${q}` : all;
  });
}

export function polishResultText(text: string, sign: Signer): string {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const out: string[] = [];
  let fence: string | null = null;
  let blank = 0;
  for (const raw of lines) {
    const line = raw.replace(/[ \t]+$/, "");
    const m = FENCE.exec(line);
    if (fence) {
      out.push(line);
      if (m && m[1]![0] === fence[0] && m[1]!.length >= fence.length && line.trim() === m[1]) fence = null;
      continue;
    }
    if (m) {
      fence = m[1]!;
      blank = 0;
      out.push(line);
      continue;
    }
    if (line === "") {
      if (++blank > 1) continue;
    } else blank = 0;
    out.push(rewriteImages(line, sign));
  }
  if (fence) out.push(fence);
  while (out.length && out[0] === "") out.shift();
  while (out.length && out[out.length - 1] === "") out.pop();
  return out.join("\n");
}
