/**
 * A model request's conversation sent without ever being one string. The SDKs serialize their
 * params with `JSON.stringify` and hand the string to `fetch`, which encodes it again: with a long
 * conversation that is two full copies of it (a 46 MiB request: ~92 MiB more at the peak) on top
 * of the transcript they are made from. Instead the conversation goes into the params as a
 * stand-in (`deferArray`) whose JSON is a short token; the SDK client's fetch (`withStreamedArrays`)
 * finds the token in the body and sends the array in its place, one item serialized and encoded
 * at a time, with the exact Content-Length (measured by a first pass that keeps nothing). The
 * bytes on the wire are those `JSON.stringify` of the whole params would have made. The SDKs see
 * an empty array where the conversation goes: they only look at it for helper-tagged messages,
 * which runcell never sends.
 */
import type { FetchLike } from "../../lib/bounded-fetch.ts";

const TOKEN_PREFIX = "runcell-deferred-array-";
const deferred = new Map<string, readonly unknown[]>();

export interface Deferred {
  /** Goes where the array would (its JSON is the token). */
  readonly value: unknown[];
  /** Forgets the array (after the request, sent or not). */
  release(): void;
}

export function deferArray(items: readonly unknown[]): Deferred {
  const token = TOKEN_PREFIX + crypto.randomUUID();
  deferred.set(token, items);
  const value = Object.assign([] as unknown[], { toJSON: () => token });
  return { value, release: () => void deferred.delete(token) };
}

/**
 * Sends a request with `items` deferred: `send` gets the stand-in to put where the array goes; the
 * array is forgotten once `send` has settled, sent or not.
 */
export async function withDeferred<T>(items: readonly unknown[], send: (value: unknown[]) => PromiseLike<T>): Promise<T> {
  const conversation = deferArray(items);
  try {
    return await send(conversation.value);
  } finally {
    conversation.release();
  }
}

/** How many arrays are waiting to be sent (tests: none is left behind). */
export const deferredCount = () => deferred.size;

const itemJson = (item: unknown) => JSON.stringify(item) ?? "null";

/** `base` with request bodies holding a deferred array's token streamed as described above. */
export function withStreamedArrays(base: FetchLike): typeof fetch {
  const wrapped = (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const body = init?.body;
    if (typeof body !== "string") return base(input, init);
    const at = body.indexOf(`"${TOKEN_PREFIX}`);
    if (at < 0) return base(input, init);
    const end = body.indexOf('"', at + 1);
    const items = deferred.get(body.slice(at + 1, end));
    if (!items) return base(input, init);
    const head = `${body.slice(0, at)}[`;
    const tail = `]${body.slice(end + 1)}`;
    let length = Buffer.byteLength(head) + Buffer.byteLength(tail) + Math.max(0, items.length - 1);
    for (const item of items) length += Buffer.byteLength(itemJson(item));
    const encoder = new TextEncoder();
    let next = -1;
    const stream = new ReadableStream<Uint8Array>({
      pull(ctl) {
        if (next === -1) ctl.enqueue(encoder.encode(head));
        else if (next < items.length) ctl.enqueue(encoder.encode((next ? "," : "") + itemJson(items[next])));
        else {
          ctl.enqueue(encoder.encode(tail));
          ctl.close();
        }
        next++;
      },
    });
    const headers = new Headers(init!.headers);
    headers.set("content-length", String(length));
    return base(input, { ...init, body: stream, headers, duplex: "half" } as RequestInit);
  };
  // (The SDKs call it as a plain function; Bun's `fetch.preconnect` is not needed.)
  return wrapped as typeof fetch;
}
