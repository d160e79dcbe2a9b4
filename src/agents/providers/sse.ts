/**
 * Server-sent events read from a response body, each handed to `onEvent` as soon as its blank
 * line arrives — a plain loop over the body's reads with no async generator, record or array per
 * event. The provider SDKs' own stream iterators cost, for a model answer streamed in small
 * deltas, two async generators, an SSE record, a lines array and a joined copy per delta: reading
 * 40 answers of 256 KiB at once through the Anthropic SDK's iterator peaks at ~5.3× the text in
 * RSS, against ~2.1× for the bytes alone (bench/memory.ts part 3).
 *
 * The parsing is the SDK's (and the spec's, for what the model APIs send): lines end with LF,
 * CRLF or CR; `event:` and `data:` fields (one optional space after the colon), `data` lines
 * joined with LF; `:` comments and other fields ignored; a BOM at the start of a line dropped; an
 * event without its closing blank line at the end of the body is not dispatched.
 *
 * An exception thrown by `onEvent` (an error event, bad JSON) or by a read ends the reading: the
 * body is cancelled (the connection is not left half-read) and the exception is rethrown.
 * `onEvent` returning `false` (a stream's end sentinel, OpenAI's `[DONE]`) ends it quietly, the
 * rest of the body cancelled.
 *
 * A body larger than `limit.bytes` ends the reading with `limit.error()` (the body cancelled): a
 * model server that streams without end must not hold the server's memory and disk without end.
 */
export async function readServerSentEvents(
  body: ReadableStream<Uint8Array>,
  onEvent: (event: string | null, data: string) => boolean | void,
  limit?: { bytes: number; error(): Error },
): Promise<void> {
  const reader = body.getReader();
  let read = 0;
  const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  let event: string | null = null;
  let data: string | null = null;
  let stopped = false;

  const line = (text: string, start: number, end: number) => {
    if (text.charCodeAt(start) === 0xfeff) start++;
    if (start === end) {
      if (event === null && data === null) return;
      const e = event;
      const d = data ?? "";
      event = null;
      data = null;
      if (!stopped && onEvent(e, d) === false) stopped = true;
      return;
    }
    const colon = text.indexOf(":", start);
    if (colon === start) return; // a comment
    const nameEnd = colon < 0 || colon > end ? end : colon;
    const name = nameEnd - start;
    const isData = name === 4 && text.startsWith("data", start);
    if (!isData && !(name === 5 && text.startsWith("event", start))) return;
    let from = nameEnd === end ? end : nameEnd + 1;
    if (from < end && text.charCodeAt(from) === 0x20) from++;
    const value = text.slice(from, end);
    if (isData) data = data === null ? value : `${data}\n${value}`;
    else event = value;
  };

  /** Dispatches every complete line of `text` from `from` on; returns where the incomplete rest begins. */
  const lines = (text: string, final: boolean, from = 0): number => {
    let start = from;
    if (!text.includes("\r")) {
      for (let end = text.indexOf("\n"); end >= 0 && !stopped; end = text.indexOf("\n", start)) {
        line(text, start, end);
        start = end + 1;
      }
    } else {
      for (let i = from; i < text.length && !stopped; i++) {
        const c = text.charCodeAt(i);
        if (c !== 0x0a && c !== 0x0d) continue;
        if (c === 0x0d && i + 1 === text.length && !final) break; // a CR whose LF may come next
        line(text, start, i);
        if (c === 0x0d && text.charCodeAt(i + 1) === 0x0a) i++;
        start = i + 1;
      }
    }
    if (final && start < text.length && !stopped) line(text, start, text.length);
    return start;
  };

  let pending = "";
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (limit && (read += value.byteLength) > limit.bytes) throw limit.error();
      const decoded = decoder.decode(value, { stream: true });
      // Nothing ends in this read (and no CR waits for its LF): keep it whole, scan nothing.
      if (!decoded.includes("\n") && !decoded.includes("\r") && !pending.endsWith("\r")) {
        pending += decoded;
        continue;
      }
      if (pending === "") {
        pending = decoded.slice(lines(decoded, false));
        if (stopped) break;
        continue;
      }
      // The line the previous read left unfinished is completed with this read's first line: a
      // short join. Joining the whole read to it (and scanning that) copied every read once more.
      const nl = firstLineEnd(decoded);
      const head = pending + decoded.slice(0, nl + 1);
      const used = lines(head, false);
      if (stopped) break;
      // (Only a CR that ends this read is left unused: its LF may come next.)
      pending = used < head.length ? head.slice(used) + decoded.slice(nl + 1) : decoded.slice(lines(decoded, false, nl + 1));
      if (stopped) break;
    }
    if (!stopped) lines(pending + decoder.decode(), true);
    finished = !stopped;
  } finally {
    if (finished) reader.releaseLock();
    else await reader.cancel().catch(() => undefined);
  }
}

/** Where the first line of `text` ends: its first LF, or its first CR (the LF of a CRLF included). */
function firstLineEnd(text: string): number {
  const lf = text.indexOf("\n");
  const cr = text.indexOf("\r");
  if (cr < 0 || (lf >= 0 && lf < cr)) return lf;
  return text.charCodeAt(cr + 1) === 0x0a ? cr + 1 : cr;
}
