/**
 * Streams a workspace file as an HTTP response. Content type comes from the extension; images,
 * PDFs and plain-text kinds are shown inline, anything else (HTML included) is an attachment, and
 * every file carries a CSP sandbox so a file from a workspace can never run script on our origin.
 */
import type { Download } from "../workspaces/files.ts";
import { Errors } from "../lib/errors.ts";

const INLINE = /^(image\/(png|jpeg|gif|webp|avif|bmp|x-icon|vnd\.microsoft\.icon|svg\+xml)|text\/(plain|markdown|csv)|application\/(json|pdf))(;|$)/;

export function contentTypeOf(name: string): string {
  const type = Bun.file(name).type || "application/octet-stream";
  return type.startsWith("text/") && !type.includes("charset") ? `${type};charset=utf-8` : type;
}

function disposition(kind: "inline" | "attachment", name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** Files up to this size are sent in one piece (with Content-Length); larger ones are streamed. */
const BUFFER_UP_TO = 1024 * 1024;

function streamOf(dl: Download): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const r = await dl.body.next();
        if (r.done) ctrl.close();
        else ctrl.enqueue(r.value);
      } catch (e) {
        ctrl.error(e);
      }
    },
    async cancel() {
      await dl.body.return(undefined);
      await dl.close();
    },
  });
}

export async function fileResponse(dl: Download): Promise<Response> {
  const type = contentTypeOf(dl.name);
  let body: ReadableStream<Uint8Array> | Uint8Array;
  if (dl.size <= BUFFER_UP_TO) {
    const parts: Uint8Array[] = [];
    for await (const chunk of dl.body) parts.push(chunk);
    body = Buffer.concat(parts);
  } else body = streamOf(dl);
  return new Response(body as BodyInit, {
    status: 200,
    headers: {
      "content-type": type,
      // Bun sends a stream chunked and drops this; a buffered body gets its real length.
      "content-length": String(dl.size),
      "content-disposition": disposition(INLINE.test(type) ? "inline" : "attachment", dl.name),
      "content-security-policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox",
      "cache-control": "private, no-cache",
    },
  });
}

/** The `*` of a route is the raw (percent-encoded) rest of the path: decode it, or 400. */
export function decodeWildcard(raw: string | undefined): string {
  try {
    return decodeURIComponent(raw ?? "");
  } catch {
    throw Errors.validation("path", "The file path is not valid percent-encoding");
  }
}
