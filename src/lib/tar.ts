/**
 * A small streaming tar.gz writer and reader (POSIX ustar, sizes above 8 GiB in GNU base-256),
 * for backups: files are streamed from and to disk in 1 MiB chunks through node:zlib, never held
 * in memory whole, and the archives are ordinary `tar -xzf` material. (Bun.Archive, in Bun 1.4,
 * reads whole inputs into memory and drops `Bun.file` contents.)
 *
 * The reader accepts what GNU tar and bsdtar write for regular files (ustar, pax `x`/`g` headers,
 * GNU long names, a leading `./`); links, devices and other entry types are refused — callers
 * decide which names they accept.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip, createGzip } from "node:zlib";

const BLOCK = 512;
const CHUNK = 1 << 20;

export interface TarSource {
  name: string;
  size: number;
  mode?: number;
  /** Seconds since the epoch. */
  mtime?: number;
  /** The content: bytes, or a file on disk (read in chunks). */
  data: Uint8Array | { path: string };
}

export class TarError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TarError";
  }
}

function writeString(buf: Buffer, offset: number, length: number, value: string) {
  const bytes = Buffer.from(value, "utf8");
  if (bytes.length > length) throw new TarError(`tar: "${value}" is too long for its field`);
  bytes.copy(buf, offset);
}

function writeOctal(buf: Buffer, offset: number, length: number, value: number) {
  const digits = value.toString(8);
  if (digits.length <= length - 1) {
    writeString(buf, offset, length, digits.padStart(length - 1, "0"));
    return;
  }
  // GNU base-256: high bit of the first byte, big-endian value in the rest.
  let v = BigInt(value);
  for (let i = length - 1; i >= 1; i--) {
    buf[offset + i] = Number(v & 0xffn);
    v >>= 8n;
  }
  buf[offset] = 0x80;
}

function header(e: TarSource): Buffer {
  const h = Buffer.alloc(BLOCK);
  writeString(h, 0, 100, e.name);
  writeOctal(h, 100, 8, e.mode ?? 0o600);
  writeOctal(h, 108, 8, 0);
  writeOctal(h, 116, 8, 0);
  writeOctal(h, 124, 12, e.size);
  writeOctal(h, 136, 12, Math.floor(e.mtime ?? Date.now() / 1000));
  h.fill(0x20, 148, 156); // checksum is computed with its own field as spaces
  h[156] = 0x30; // '0' regular file
  writeString(h, 257, 6, "ustar");
  writeString(h, 263, 2, "00");
  writeString(h, 265, 32, "root");
  writeString(h, 297, 32, "root");
  let sum = 0;
  for (const b of h) sum += b;
  writeString(h, 148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

const padding = (size: number) => Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);

/**
 * Writes `entries` as a gzipped tar to `path` (created with mode 0600, replaced if present).
 * `onProgress(name, done, size)` is called as each entry's bytes go out.
 */
export async function writeTarGz(
  path: string,
  entries: TarSource[],
  opts: { level?: number; onProgress?: (name: string, done: number, size: number) => void } = {},
): Promise<void> {
  async function* tar() {
    for (const e of entries) {
      yield header(e);
      let done = 0;
      if (e.data instanceof Uint8Array) {
        if (e.data.length !== e.size) throw new TarError(`tar: ${e.name}: size ${e.size} but ${e.data.length} bytes given`);
        yield Buffer.from(e.data.buffer, e.data.byteOffset, e.data.byteLength);
        done = e.size;
      } else {
        for await (const chunk of createReadStream(e.data.path, { highWaterMark: CHUNK, end: e.size > 0 ? e.size - 1 : undefined, start: 0 }) as AsyncIterable<Buffer>) {
          if (e.size === 0) break;
          done += chunk.length;
          yield chunk;
          opts.onProgress?.(e.name, done, e.size);
        }
        if (done !== e.size) throw new TarError(`tar: ${e.data.path} changed size while being archived (${done} of ${e.size} bytes)`);
      }
      opts.onProgress?.(e.name, e.size, e.size);
      yield padding(e.size);
    }
    yield Buffer.alloc(BLOCK * 2);
  }
  await pipeline(Readable.from(tar()), createGzip({ level: opts.level ?? 6 }), createWriteStream(path, { mode: 0o600 }));
}

/** Pull-based reader over the decompressed byte stream. */
class Bytes {
  private chunks: Buffer[] = [];
  private have = 0;
  private ended = false;
  constructor(private it: AsyncIterator<Buffer>) {}

  /** The stream's next chunk; null (and `ended`) at its end. */
  private async next(): Promise<Buffer | null> {
    let r: IteratorResult<Buffer>;
    try {
      r = await this.it.next();
    } catch (e) {
      throw gzipError(e);
    }
    if (!r.done) return r.value;
    this.ended = true;
    return null;
  }

  private async fill(n: number) {
    while (this.have < n && !this.ended) {
      const chunk = await this.next();
      if (chunk) {
        this.chunks.push(chunk);
        this.have += chunk.length;
      }
    }
  }

  /** Exactly n bytes, or null at a clean end of stream; throws on a truncated stream. */
  async take(n: number): Promise<Buffer | null> {
    await this.fill(n);
    if (this.have === 0 && this.ended) return null;
    if (this.have < n) throw new TarError("the archive is truncated");
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length ? [rest] : [];
    this.have = rest.length;
    return out;
  }

  /** Reads and discards the rest of the stream (zero blocks after the end-of-archive marker). */
  async drain() {
    this.chunks = [];
    this.have = 0;
    while (!this.ended) await this.next();
  }

  /** n bytes as chunks of at most CHUNK. */
  async *stream(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      await this.fill(Math.min(left, CHUNK));
      if (this.have === 0) throw new TarError("the archive is truncated");
      const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      const take = Math.min(left, all.length, CHUNK);
      const out = all.subarray(0, take);
      const rest = all.subarray(take);
      this.chunks = rest.length ? [rest] : [];
      this.have = rest.length;
      left -= take;
      yield out;
    }
  }
}

const cstring = (b: Buffer) => {
  const end = b.indexOf(0);
  return b.subarray(0, end < 0 ? b.length : end).toString("utf8");
};

function readNumber(b: Buffer): number {
  if (b[0]! & 0x80) {
    let v = BigInt(b[0]! & 0x7f);
    for (let i = 1; i < b.length; i++) v = (v << 8n) | BigInt(b[i]!);
    return Number(v);
  }
  const s = cstring(b).trim();
  if (!s) return 0;
  if (!/^[0-7]+$/.test(s)) throw new TarError(`the archive is corrupted (bad number field "${s}")`);
  return Number.parseInt(s, 8);
}

function parsePax(body: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < body.length) {
    const space = body.indexOf(0x20, i);
    if (space < 0) break;
    const len = Number.parseInt(body.subarray(i, space).toString("utf8"), 10);
    if (!Number.isFinite(len) || len <= 0) break;
    const record = body.subarray(space + 1, i + len - 1).toString("utf8");
    const eq = record.indexOf("=");
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1);
    i += len;
  }
  return out;
}

export interface TarEntry {
  name: string;
  size: number;
  mode: number;
  /** The content in chunks; must be consumed (or drained) before the next entry. */
  body: AsyncGenerator<Buffer>;
}

/**
 * Reads a gzipped tar, calling `onEntry` for each regular file in order (directories are skipped,
 * other types refused). Errors are
 * TarError with a sentence for the operator ("corrupted", "truncated", "not a gzip file").
 */
export async function readTarGz(path: string, onEntry: (e: TarEntry) => Promise<void>): Promise<void> {
  const source = createReadStream(path, { highWaterMark: CHUNK });
  const gunzip = createGunzip();
  const piped = pipeline(source, gunzip).catch((e) => {
    throw gzipError(e);
  });
  piped.catch(() => {}); // surfaced through the iterator below
  const bytes = new Bytes((gunzip as unknown as AsyncIterable<Buffer>)[Symbol.asyncIterator]());
  let callerError: unknown = null;
  try {
    let longName: string | null = null;
    let pax: Record<string, string> = {};
    for (;;) {
      const h = await bytes.take(BLOCK);
      if (!h) throw new TarError("the archive is truncated (no end-of-archive marker)");
      if (h.every((b) => b === 0)) break;
      let sum = 0;
      for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
      if (readNumber(h.subarray(148, 156)) !== sum) throw new TarError("the archive is corrupted (bad tar header checksum)");
      const size = readNumber(h.subarray(124, 136));
      const type = String.fromCharCode(h[156]!);
      const magic = h.subarray(257, 263).toString("latin1");
      const prefix = magic.startsWith("ustar") ? cstring(h.subarray(345, 500)) : "";
      let name = pax.path ?? longName ?? (prefix ? `${prefix}/${cstring(h.subarray(0, 100))}` : cstring(h.subarray(0, 100)));
      const mode = readNumber(h.subarray(100, 108));
      const pad = (BLOCK - (size % BLOCK)) % BLOCK;
      const readBody = async () => {
        const parts: Buffer[] = [];
        for await (const c of bytes.stream(size)) parts.push(c);
        if (pad) await bytes.take(pad);
        return Buffer.concat(parts);
      };
      if (type === "x") {
        pax = { ...pax, ...parsePax(await readBody()) };
        continue;
      }
      if (type === "g") {
        await readBody();
        continue;
      }
      if (type === "L") {
        longName = cstring(await readBody());
        continue;
      }
      pax = {};
      longName = null;
      name = name.replace(/^(\.\/)+/, "");
      if (type === "5" || (name.endsWith("/") && (type === "0" || type === "\0"))) {
        if (size) await readBody();
        continue;
      }
      if (type !== "0" && type !== "\0" && type !== "7") throw new TarError(`the archive holds "${name}" of a type that is not a regular file (tar type '${type}')`);
      const body = bytes.stream(size);
      try {
        await onEntry({ name, size, mode, body });
      } catch (e) {
        callerError = e;
        throw e;
      }
      for await (const _ of body) {
        // drain what the caller did not read
      }
      if (pad) await bytes.take(pad);
    }
    // Read to the end: gunzip checks the stream's CRC and length only there.
    await bytes.drain();
    await piped;
  } catch (e) {
    source.destroy();
    gunzip.destroy();
    // The caller's own refusals pass through as they are; stream failures become a sentence.
    throw e === callerError ? e : gzipError(e);
  }
}

function gzipError(e: unknown): TarError {
  if (e instanceof TarError) return e;
  const err = e as NodeJS.ErrnoException;
  if (err.code === "ENOENT" || err.code === "EACCES" || err.code === "EISDIR") return new TarError(err.message);
  if (err.code === "Z_DATA_ERROR" || err.code === "Z_BUF_ERROR" || /header|check|invalid|unexpected end/i.test(err.message ?? "")) {
    return new TarError(`the archive is corrupted or truncated (gzip: ${err.message})`);
  }
  return new TarError(`cannot read the archive: ${err.message ?? String(e)}`);
}
