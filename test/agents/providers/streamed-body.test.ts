/**
 * src/agents/providers/streamed-body.ts: the conversation streamed into the request body.
 * - on the wire, byte for byte what `JSON.stringify` of the whole params makes, with the exact
 *   Content-Length (non-ASCII text, empty and holey arrays) and no chunked encoding;
 * - a body without a stand-in passes through untouched;
 * - both SDK providers send a real conversation this way (the mock servers parse what they got),
 *   and no stand-in is left behind after a success, an error answer or an abort.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { getProvider } from "../../../src/agents/providers/index.ts";
import type { ChatMessage } from "../../../src/agents/providers/types.ts";
import { deferArray, deferredCount, withStreamedArrays } from "../../../src/agents/providers/streamed-body.ts";
import { toAnthropicMessages } from "../../../src/agents/providers/anthropic.ts";
import { startMockAnthropic } from "../../helpers/mock-anthropic.ts";
import { startMockOpenAI } from "../../helpers/mock-openai.ts";
import { request, run } from "./scenarios.ts";

const received: { body: string; headers: Record<string, string | null> }[] = [];
const raw = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    const body = await req.text();
    received.push({ body, headers: { "content-length": req.headers.get("content-length"), "transfer-encoding": req.headers.get("transfer-encoding"), "x-kept": req.headers.get("x-kept") } });
    return new Response("ok");
  },
});
afterAll(() => raw.stop(true));

const send = withStreamedArrays((input, init) => fetch(input, init));

describe("withStreamedArrays", () => {
  test.each([
    ["ASCII messages", [{ role: "user", content: "hello" }, { role: "assistant", content: "hi there" }]],
    ["non-ASCII text (2-, 3- and 4-byte characters)", [{ text: "ünïcødé ✓ 日本語 🚀", n: 1 }, { text: '"quoted"\n\\' }]],
    ["an empty array", []],
    ["one item", [{ a: [1, 2, { b: null }] }]],
    ["holes and undefined (null in JSON, as JSON.stringify writes them)", [1, undefined, () => 0, "x"]],
  ])("%s: the bytes JSON.stringify of the whole would make, with their Content-Length", async (_name, items) => {
    const conversation = deferArray(items as unknown[]);
    const params = { model: "m", messages: conversation.value, stream: true, tail: "ü" };
    const expected = JSON.stringify({ ...params, messages: items });
    received.length = 0;
    await send(raw.url, { method: "POST", body: JSON.stringify(params), headers: { "content-type": "application/json", "x-kept": "yes" } });
    conversation.release();
    expect(received[0]!.body).toBe(expected);
    expect(received[0]!.headers).toEqual({ "content-length": String(Buffer.byteLength(expected)), "transfer-encoding": null, "x-kept": "yes" });
  });

  test("a body without a stand-in (or with a released one) goes as it is", async () => {
    received.length = 0;
    await send(raw.url, { method: "POST", body: '{"plain":true}' });
    const gone = deferArray([1, 2]);
    const body = JSON.stringify({ messages: gone.value });
    gone.release();
    await send(raw.url, { method: "POST", body });
    expect(received.map((r) => r.body)).toEqual(['{"plain":true}', body]);
    expect(deferredCount()).toBe(0);
  });
});

/** A conversation of a few turns with text the JSON must escape and multi-byte characters. */
const conversation: ChatMessage[] = [
  { role: "user", content: [{ type: "text", text: 'Find "TODO" in ünïcødé files 🚀\n' }] },
  { role: "assistant", content: [{ type: "text", text: "Searching." }, { type: "tool_use", id: "tu_1", name: "Bash", input: { command: "grep -rn TODO ." } }] },
  { role: "user", content: [{ type: "tool_result", tool_use_id: "tu_1", content: "a.ts:1: // TODO ✓\n".repeat(500) }] },
];

describe("the SDK providers send the conversation streamed", () => {
  test("anthropic: the mock receives the whole conversation; nothing is left behind, also after an error answer", async () => {
    const mock = await startMockAnthropic({ apiKey: "sk-test" });
    try {
      mock.enqueue({ text: "done" });
      const ok = await run(getProvider("anthropic"), request(mock, { messages: conversation }));
      expect(ok.err).toBeUndefined();
      expect(mock.requests[0]!.body.messages).toEqual(JSON.parse(JSON.stringify(toAnthropicMessages(conversation))));
      expect(deferredCount()).toBe(0);
      mock.enqueue({ error: { status: 400, type: "invalid_request_error", message: "nope" } });
      const bad = await run(getProvider("anthropic"), request(mock, { messages: conversation }));
      expect(bad.err).toBeDefined();
      expect(deferredCount()).toBe(0);
    } finally {
      mock.stop();
    }
  });

  test("openai: the same, and an abort leaves nothing behind", async () => {
    const mock = await startMockOpenAI({ apiKey: "sk-test" });
    try {
      mock.enqueue({ text: "done" });
      const ok = await run(getProvider("openai"), request(mock, { messages: conversation }));
      expect(ok.err).toBeUndefined();
      const sent = mock.requests[0]!.body.messages as { role: string; content?: unknown }[];
      expect(sent[0]).toEqual({ role: "system", content: "You are a test agent." });
      expect(JSON.stringify(sent)).toContain("ünïcødé files 🚀");
      expect(sent.some((m) => m.role === "tool")).toBe(true);
      expect(deferredCount()).toBe(0);
      const aborted = new AbortController();
      aborted.abort();
      await run(getProvider("openai"), request(mock, { messages: conversation, signal: aborted.signal }));
      expect(deferredCount()).toBe(0);
    } finally {
      mock.stop();
    }
  });
});
