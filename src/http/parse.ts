/**
 * The JSON body parser every route shares: JSON only (400 otherwise), at most 1 MiB (413, also
 * for chunked bodies without Content-Length), a Content-Encoding other than identity 400; malformed
 * JSON, a body that is not UTF-8 (RFC 8259: JSON between systems is UTF-8; its bad bytes are not
 * quietly turned into U+FFFD), and JSON src/lib/json-input.ts refuses (too deep, NUL, lone
 * surrogates, __proto__), 400 VALIDATION_FAILED.
 */
import { AppError } from "../lib/errors.ts";
import { parseClientJson } from "../lib/json-input.ts";
import { HttpErrors } from "./errors.ts";

export const MAX_JSON_BODY = 1024 * 1024;

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

export async function readBodyText(req: Request, limit = MAX_JSON_BODY): Promise<string> {
  const declared = Number(req.headers.get("content-length") ?? NaN);
  if (declared > limit) throw HttpErrors.payloadTooLarge(limit);
  if (!req.body) return "";
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      reader.cancel().catch(() => {});
      throw HttpErrors.payloadTooLarge(limit);
    }
    chunks.push(value);
  }
  try {
    return utf8.decode(Buffer.concat(chunks));
  } catch {
    throw new AppError("VALIDATION_FAILED", "The body is not valid UTF-8", { field: "body", reason: "invalid utf-8" });
  }
}

export function isJsonContentType(ct: string | null): boolean {
  if (!ct) return false;
  const base = ct.split(";")[0]!.trim().toLowerCase();
  return base === "application/json" || (base.startsWith("application/") && base.endsWith("+json"));
}

/** Parses a JSON request body (at most `limit` bytes); an empty body without a Content-Type is `undefined`. */
export async function parseJsonBody(req: Request, limit = MAX_JSON_BODY): Promise<unknown> {
  const ct = req.headers.get("content-type");
  if (ct && !isJsonContentType(ct)) throw HttpErrors.unsupportedMediaType(ct.split(";")[0]!.trim());
  // A compressed body is not read as if it were JSON (nor a plain one labelled compressed).
  const encoding = req.headers.get("content-encoding");
  if (encoding && encoding.trim().toLowerCase() !== "identity") throw HttpErrors.unsupportedEncoding(encoding.trim());
  const text = await readBodyText(req, limit);
  if (text.trim() === "") return undefined;
  if (!ct) throw HttpErrors.unsupportedMediaType(null);
  return parseClientJson(text, "body", " body");
}
