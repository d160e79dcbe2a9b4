/**
 * Streams a workspace file as an HTTP response. Content type comes from the extension; images,
 * PDFs and plain-text kinds are shown inline, anything else (HTML included) is an attachment, and
 * every file carries a CSP sandbox so a file from a workspace can never run script on our origin.
 */
import type { Download } from "../workspaces/files.ts";

const INLINE = /^(image\/(png|jpeg|gif|webp|avif|bmp|x-icon|vnd\.microsoft\.icon|svg\+xml)|text\/(plain|markdown|csv)|application\/(json|pdf))(;|$)/;

export function contentTypeOf(name: string): string {
  const type = Bun.file(name).type || "application/octet-stream";
  return type.startsWith("text/") && !type.includes("charset") ? `${type};charset=utf-8` : type;
}

function disposition(kind: "inline" | "attachment", name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

export function fileResponse(dl: Download): Response {
  const type = contentTypeOf(dl.name);
  const body = new ReadableStream<Uint8Array>({
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
    },
  });
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": type,
      "content-length": String(dl.size),
      "content-disposition": disposition(INLINE.test(type) ? "inline" : "attachment", dl.name),
      "content-security-policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox",
      "cache-control": "private, no-cache",
    },
  });
}
