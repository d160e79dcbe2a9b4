/**
 * An MCP tool result as the model's tool output: text as it is; images and audio (and binary
 * resources) stored in the workspace under /workspace/.mcp/ and named with their path and a signed
 * URL; embedded text resources inlined under their URI; resource links as their URI;
 * structuredContent as JSON when there is no content. The whole output is capped.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

export const MCP_OUTPUT_MAX = 100_000;
export const MCP_FILES_DIR = ".mcp";

export interface ResultFiles {
  /** Stores bytes at a path relative to /workspace; returns a signed URL for it. */
  store(relPath: string, data: Uint8Array): Promise<string>;
}

const EXT: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/gif": "gif",
  "image/webp": "webp",
  "image/svg+xml": "svg",
  "audio/wav": "wav",
  "audio/mpeg": "mp3",
  "audio/ogg": "ogg",
  "application/pdf": "pdf",
  "application/json": "json",
  "application/gzip": "gz",
};

const slug = (s: string) => s.replace(/[^A-Za-z0-9_-]+/g, "-").slice(0, 40) || "file";

export async function resultText(r: CallToolResult, files: ResultFiles, label: { server: string; tool: string; callId: string }): Promise<string> {
  const parts: string[] = [];
  let n = 0;
  const store = async (kind: string, base64: string, mime: string | undefined) => {
    const bytes = Buffer.from(base64, "base64");
    const ext = (mime && EXT[mime]) ?? "bin";
    const rel = `${MCP_FILES_DIR}/${slug(label.server)}-${slug(label.tool)}-${slug(label.callId).slice(-12)}-${++n}.${ext}`;
    const url = await files.store(rel, new Uint8Array(bytes));
    return `[${kind}: /workspace/${rel} (${mime ?? "application/octet-stream"}, ${bytes.byteLength} bytes) ${url}]`;
  };
  for (const c of r.content ?? []) {
    if (c.type === "text") parts.push(c.text);
    else if (c.type === "image" || c.type === "audio") parts.push(await store(c.type, c.data, c.mimeType));
    else if (c.type === "resource") {
      const res = c.resource as { uri: string; mimeType?: string; text?: string; blob?: string };
      if (typeof res.text === "string") parts.push(`[resource ${res.uri}]\n${res.text}`);
      else if (typeof res.blob === "string") parts.push(`${await store("resource", res.blob, res.mimeType)} (${res.uri})`);
      else parts.push(`[resource ${res.uri}]`);
    } else if (c.type === "resource_link") {
      const l = c as { uri: string; name?: string; description?: string };
      parts.push(`[resource link${l.name ? ` ${l.name}` : ""}: ${l.uri}${l.description ? ` — ${l.description}` : ""}]`);
    }
  }
  if (!parts.length && r.structuredContent !== undefined) parts.push(JSON.stringify(r.structuredContent));
  let out = parts.join("\n");
  if (out.length > MCP_OUTPUT_MAX) out = `${out.slice(0, MCP_OUTPUT_MAX)}\n[output truncated to ${MCP_OUTPUT_MAX} characters]`;
  return out;
}
