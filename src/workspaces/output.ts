/**
 * Exec output handling: the Docker multiplexed-stream demuxer (8-byte frame headers: stream type,
 * 3 zero bytes, big-endian length) and a capped collector that keeps the head and the tail of
 * the combined output and says how much it dropped in between — the end of a failing build is
 * usually what matters, and so is its beginning.
 */
export class Demuxer {
  private pending: Uint8Array = new Uint8Array(0);

  constructor(private onFrame: (stream: number, payload: Uint8Array) => void) {}

  push(chunk: Uint8Array) {
    let buf = this.pending.byteLength ? concat(this.pending, chunk) : chunk;
    while (buf.byteLength >= 8) {
      const size = ((buf[4]! << 24) >>> 0) + (buf[5]! << 16) + (buf[6]! << 8) + buf[7]!;
      if (buf.byteLength < 8 + size) break;
      if (size > 0) this.onFrame(buf[0]!, buf.subarray(8, 8 + size));
      buf = buf.subarray(8 + size);
    }
    this.pending = buf.byteLength ? buf.slice() : new Uint8Array(0);
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}

export class CappedOutput {
  private head: Uint8Array[] = [];
  private headBytes = 0;
  private tail: Uint8Array[] = [];
  private tailBytes = 0;
  private dropped = 0;
  private readonly headCap: number;
  private readonly tailCap: number;

  constructor(readonly cap: number) {
    this.tailCap = Math.floor(cap / 2);
    this.headCap = cap - this.tailCap;
  }

  push(chunk: Uint8Array) {
    if (this.headBytes < this.headCap) {
      const n = Math.min(chunk.byteLength, this.headCap - this.headBytes);
      this.head.push(chunk.slice(0, n));
      this.headBytes += n;
      chunk = chunk.subarray(n);
    }
    if (!chunk.byteLength) return;
    this.tail.push(chunk.slice());
    this.tailBytes += chunk.byteLength;
    while (this.tailBytes > this.tailCap) {
      const first = this.tail[0]!;
      const excess = this.tailBytes - this.tailCap;
      if (first.byteLength <= excess) {
        this.tail.shift();
        this.tailBytes -= first.byteLength;
        this.dropped += first.byteLength;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailBytes -= excess;
        this.dropped += excess;
      }
    }
  }

  get truncated() {
    return this.dropped > 0;
  }

  get totalBytes() {
    return this.headBytes + this.tailBytes + this.dropped;
  }

  text(): string {
    const dec = (parts: Uint8Array[]) => new TextDecoder().decode(Buffer.concat(parts));
    if (!this.dropped) return dec([...this.head, ...this.tail]);
    return `${dec(this.head)}\n[… ${this.dropped} bytes of output omitted …]\n${dec(this.tail)}`;
  }
}
