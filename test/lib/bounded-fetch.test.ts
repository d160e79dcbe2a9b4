/**
 * readHead: at most `max` bytes, a chunk cut where the limit falls, the rest of the stream
 * cancelled (not read), a stream that fails keeping what arrived, and no body giving no bytes.
 */
import { describe, expect, test } from "bun:test";
import { readHead } from "../../src/lib/bounded-fetch.ts";

const enc = new TextEncoder();

/** A stream of `chunks` (then endless "z" chunks when `endless`), counting pulls and cancels. */
function source(chunks: string[], opts: { endless?: boolean; failAfter?: boolean } = {}) {
  const seen = { pulls: 0, cancelled: false };
  let i = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      seen.pulls++;
      if (i < chunks.length) c.enqueue(enc.encode(chunks[i++]!));
      else if (opts.failAfter) c.error(new Error("connection reset"));
      else if (opts.endless) c.enqueue(enc.encode("z".repeat(100)));
      else c.close();
    },
    cancel: () => void (seen.cancelled = true),
  });
  return { stream, seen };
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);

describe("readHead", () => {
  test("a body shorter than the limit is read whole", async () => {
    const { stream } = source(["abc", "def"]);
    expect(text(await readHead(stream, 100))).toBe("abcdef");
  });

  test("the limit cuts inside a chunk; the rest of an endless body is cancelled, not read", async () => {
    const { stream, seen } = source(["abcd", "efgh"], { endless: true });
    const head = await readHead(stream, 6);
    expect(text(head)).toBe("abcdef");
    expect(head.byteLength).toBe(6);
    expect(seen.cancelled).toBe(true);
    expect(seen.pulls).toBeLessThanOrEqual(3);
  });

  test("a limit reached at a chunk's end stops there", async () => {
    const { stream, seen } = source(["abc", "def"], { endless: true });
    expect(text(await readHead(stream, 3))).toBe("abc");
    expect(seen.cancelled).toBe(true);
  });

  test("a stream that fails keeps what arrived before", async () => {
    const { stream } = source(["partial ", "answer"], { failAfter: true });
    expect(text(await readHead(stream, 1000))).toBe("partial answer");
  });

  test("no body gives no bytes", async () => {
    expect((await readHead(null, 10)).byteLength).toBe(0);
  });
});
