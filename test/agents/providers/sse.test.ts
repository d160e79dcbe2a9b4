/**
 * src/agents/providers/sse.ts: the server-sent events a provider's body carries, parsed as the
 * SDKs parse them, whatever the reads' boundaries — and a reader that stops (an error event, bad
 * JSON) cancels the body. Bodies are real ReadableStreams fed byte chunks as a socket would.
 */
import { describe, expect, test } from "bun:test";
import { readServerSentEvents } from "../../../src/agents/providers/sse.ts";

/** A body delivering `chunks` one read each (strings are UTF-8 encoded; byte arrays as given). */
function body(chunks: (string | Uint8Array)[], onCancel?: () => void): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < chunks.length) {
        const x = chunks[i++]!;
        c.enqueue(typeof x === "string" ? enc.encode(x) : x);
      } else c.close();
    },
    cancel() {
      onCancel?.();
    },
  });
}

async function events(chunks: (string | Uint8Array)[]) {
  const out: [string | null, string][] = [];
  await readServerSentEvents(body(chunks), (e, d) => void out.push([e, d]));
  return out;
}

/** Every way of cutting `text` into two reads, and one read per character. */
function cuts(text: string): string[][] {
  const all: string[][] = [[text], [...text]];
  for (let i = 1; i < text.length; i++) all.push([text.slice(0, i), text.slice(i)]);
  return all;
}

describe("readServerSentEvents", () => {
  const stream = 'event: message_start\ndata: {"a":1}\n\nevent: ping\ndata: {}\n\n: a comment\nevent: delta\ndata: {"t":"héllo ✓"}\n\n';
  const expected: [string | null, string][] = [
    ["message_start", '{"a":1}'],
    ["ping", "{}"],
    ["delta", '{"t":"héllo ✓"}'],
  ];

  test("events, comments skipped, whatever the reads' boundaries (multi-byte characters split across reads too)", async () => {
    for (const c of cuts(stream)) expect(await events(c)).toEqual(expected);
    const bytes = new TextEncoder().encode(stream);
    const split: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i += 3) split.push(bytes.subarray(i, i + 3));
    expect(await events(split)).toEqual(expected);
  });

  test("CRLF and lone CR line endings, also with the CR and the LF in different reads", async () => {
    for (const eol of ["\r\n", "\r"]) {
      const text = stream.replaceAll("\n", eol);
      for (const c of cuts(text)) expect(await events(c)).toEqual(expected);
    }
  });

  test("any number of reads cut anywhere, with any line endings, give the same events (seeded random cuts)", async () => {
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648) % n);
    for (const eol of ["\n", "\r\n", "\r"]) {
      const text = stream.replaceAll("\n", eol).repeat(3);
      for (let round = 0; round < 200; round++) {
        const chunks: string[] = [];
        for (let at = 0; at < text.length; ) {
          const n = 1 + rand(12);
          chunks.push(text.slice(at, at + n));
          at += n;
        }
        expect(await events(chunks)).toEqual([...expected, ...expected, ...expected]);
      }
    }
  });

  test("data lines join with LF; one space after the colon is dropped, a second is kept; a field without a colon is empty; other fields are ignored", async () => {
    expect(await events(["data: one\ndata:two\ndata:  three\nid: 7\nretry: 10\n\n"])).toEqual([[null, "one\ntwo\n three"]]);
    expect(await events(["event: e\ndata\n\n"])).toEqual([["e", ""]]);
    expect(await events(["event\ndata: x\n\n"])).toEqual([["", "x"]]);
    expect(await events(["dataX: no\nevents: no\n\n"])).toEqual([]);
  });

  test("a BOM at a line's start is dropped; blank lines without a field dispatch nothing", async () => {
    expect(await events(["\uFEFFevent: a\ndata: 1\n\n\n\n"])).toEqual([["a", "1"]]);
  });

  test("the last event without its blank line is not dispatched (as the SDKs); with it, it is, even without more reads", async () => {
    expect(await events(["event: a\ndata: 1\n\nevent: b\ndata: 2\n"])).toEqual([["a", "1"]]);
    expect(await events(["event: a\ndata: 1\n\nevent: b\ndata: 2"])).toEqual([["a", "1"]]);
    expect(await events(["event: a\ndata: 1\n\nevent: b\ndata: 2\n", "\n"])).toEqual([["a", "1"], ["b", "2"]]);
  });

  test("an exception from the handler stops the reading, cancels the body and is rethrown", async () => {
    let cancelled = false;
    const seen: string[] = [];
    const p = readServerSentEvents(body(["event: a\ndata: 1\n\nevent: error\ndata: {}\n\n", "event: b\ndata: 2\n\n"], () => (cancelled = true)), (e) => {
      seen.push(e!);
      if (e === "error") throw new Error("stream error event");
    });
    await expect(p).rejects.toThrow("stream error event");
    expect(seen).toEqual(["a", "error"]);
    expect(cancelled).toBe(true);
  });

  test("a handler returning false (an end sentinel: OpenAI's [DONE]) ends the reading quietly and cancels the rest of the body", async () => {
    let cancelled = false;
    const seen: string[] = [];
    await readServerSentEvents(body(["data: 1\n\ndata: [DONE]\n\ndata: 2\n\n", "data: 3\n\n"], () => (cancelled = true)), (_e, d) => {
      seen.push(d);
      return d !== "[DONE]";
    });
    expect(seen).toEqual(["1", "[DONE]"]);
    expect(cancelled).toBe(true);
  });

  test("a read that fails is rethrown", async () => {
    const failing = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode("event: a\ndata: 1\n\n"));
        c.error(new Error("connection reset"));
      },
    });
    const seen: string[] = [];
    await expect(readServerSentEvents(failing, (e) => void seen.push(e!))).rejects.toThrow("connection reset");
  });
});
