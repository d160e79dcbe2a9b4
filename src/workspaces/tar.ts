/**
 * A minimal streaming tar reader for what Docker's archive API returns: ustar headers, PAX
 * extended headers (`x`/`g`, whose `size` overrides the header's) and GNU long names (`L`/`K`).
 * It reads one header at a time and streams an entry's body without buffering it whole.
 */
const BLOCK = 512;

export interface TarHeader {
  name: string;
  size: number;
  type: "file" | "dir" | "symlink" | "other";
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.byteLength === 0) return b;
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}

function cString(block: Uint8Array, start: number, len: number): string {
  const field = block.subarray(start, start + len);
  const nul = field.indexOf(0);
  return new TextDecoder().decode(nul < 0 ? field : field.subarray(0, nul));
}

/** Numeric field: octal ASCII, or GNU base-256 when the high bit of the first byte is set. */
export function tarNumber(block: Uint8Array, start: number, len: number): number {
  const field = block.subarray(start, start + len);
  if (field[0]! & 0x80) {
    let n = field[0]! & 0x7f;
    for (let i = 1; i < field.length; i++) n = n * 256 + field[i]!;
    return n;
  }
  const text = cString(block, start, len).trim();
  return text ? parseInt(text, 8) : 0;
}

function paxRecords(data: Uint8Array): Record<string, string> {
  const out: Record<string, string> = {};
  const text = new TextDecoder().decode(data);
  let at = 0;
  while (at < text.length) {
    const space = text.indexOf(" ", at);
    if (space < 0) break;
    const len = Number(text.slice(at, space));
    if (!Number.isFinite(len) || len <= 0) break;
    const record = text.slice(space + 1, at + len - 1);
    const eq = record.indexOf("=");
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1);
    at += len;
  }
  return out;
}

const padded = (n: number) => Math.ceil(n / BLOCK) * BLOCK;

/** The archive ended inside an entry: Docker announced more bytes than it sent (the file shrank while it was read). */
export class TruncatedEntry extends Error {
  constructor() {
    super("tar stream ended inside an entry");
    this.name = "TruncatedEntry";
  }
}

export class TarEntryReader {
  private it: AsyncIterator<Uint8Array>;
  private buf: Uint8Array = new Uint8Array(0);
  private ended = false;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.it = source[Symbol.asyncIterator]();
  }

  private async fill(n: number): Promise<boolean> {
    while (this.buf.byteLength < n) {
      if (this.ended) return false;
      const r = await this.it.next();
      if (r.done) this.ended = true;
      else this.buf = concat(this.buf, r.value);
    }
    return true;
  }

  private async take(n: number): Promise<Uint8Array> {
    if (!(await this.fill(n))) throw new Error("tar stream ended early");
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** The next entry's header (PAX/GNU metadata entries folded in), or null at the end. */
  async next(): Promise<TarHeader | null> {
    let override: { size?: number; name?: string } = {};
    for (;;) {
      if (!(await this.fill(BLOCK))) return null;
      const block = await this.take(BLOCK);
      if (block.every((b) => b === 0)) return null;
      const flag = String.fromCharCode(block[156]!);
      const size = tarNumber(block, 124, 12);
      if (flag === "x" || flag === "g" || flag === "L" || flag === "K") {
        const data = (await this.take(padded(size))).subarray(0, size);
        if (flag === "x") {
          const rec = paxRecords(data);
          if (rec.size) override.size = Number(rec.size);
          if (rec.path) override.name = rec.path;
        } else if (flag === "L") override.name = cString(data, 0, data.byteLength);
        continue;
      }
      const prefix = cString(block, 345, 155);
      const base = cString(block, 0, 100);
      const header: TarHeader = {
        name: override.name ?? (prefix ? `${prefix}/${base}` : base),
        size: override.size ?? size,
        type: flag === "0" || flag === "\0" || flag === "7" ? "file" : flag === "5" ? "dir" : flag === "2" ? "symlink" : "other",
      };
      override = {};
      return header;
    }
  }

  /** Streams exactly `size` bytes of the current entry's body, then releases the source. */
  async *body(size: number): AsyncGenerator<Uint8Array> {
    let left = size;
    try {
      while (left > 0) {
        if (this.buf.byteLength === 0) {
          if (this.ended) throw new TruncatedEntry();
          const r = await this.it.next();
          if (r.done) {
            this.ended = true;
            continue;
          }
          this.buf = r.value;
        }
        const n = Math.min(left, this.buf.byteLength);
        yield this.buf.subarray(0, n);
        this.buf = this.buf.subarray(n);
        left -= n;
      }
    } finally {
      this.close();
    }
  }

  /** Streams the current entry's body and its padding, leaving the reader at the next header (for reading many entries). */
  async *read(size: number): AsyncGenerator<Uint8Array> {
    let left = size;
    while (left > 0) {
      if (!(await this.fill(1))) throw new TruncatedEntry();
      const n = Math.min(left, this.buf.byteLength);
      yield this.buf.slice(0, n);
      this.buf = this.buf.subarray(n);
      left -= n;
    }
    const pad = padded(size) - size;
    if (pad) await this.take(pad);
  }

  /** Skips the current entry's body (and its padding) to reach the next header. */
  async discard(size: number): Promise<void> {
    await this.take(padded(size));
  }

  /** Stops reading (destroys the underlying HTTP response). */
  close() {
    Promise.resolve(this.it.return?.()).catch(() => {});
  }
}
