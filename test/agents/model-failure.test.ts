/**
 * A failed model request's task message (src/agents/model-failure.ts): the errors are the real
 * providers' (official SDKs) against local servers answering what proxies and servers really send.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cutText, MAX_MODEL_MESSAGE_CHARS, modelFailureMessage, readableModelMessage } from "../../src/agents/model-failure.ts";
import { DEFAULT_RETRY_POLICY, getProvider, ModelError, setRetryPolicy } from "../../src/agents/providers/index.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { startMockOpenAI } from "../helpers/mock-openai.ts";
import type { MockProviderServer } from "../helpers/mock-provider.ts";
import { FAST_RETRIES, request, run } from "./providers/scenarios.ts";

const mocks: Record<"anthropic" | "openai", MockProviderServer> = {} as never;
beforeAll(() => {
  setRetryPolicy(FAST_RETRIES);
  mocks.anthropic = startMockAnthropic();
  mocks.openai = startMockOpenAI();
});
afterAll(async () => {
  setRetryPolicy(DEFAULT_RETRY_POLICY);
  await Promise.all(Object.values(mocks).map((m) => m.stop()));
});

const same = (s: string) => s;
// A 54 KB error page, as an nginx with a custom page answers for a dead upstream.
const PAGE = `<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>\n  502 Bad Gateway &amp; friends\n</title></head><body>${"<p>lorem ipsum</p>".repeat(3000)}</body></html>`;

async function failure(provider: "anthropic" | "openai", raw: { status: number; headers: Record<string, string>; body: string }): Promise<ModelError> {
  const mock = mocks[provider];
  mock.reset();
  mock.script(() => ({ raw }));
  const { err } = await run(getProvider(provider), request(mock));
  expect(err).toBeInstanceOf(ModelError);
  return err as ModelError;
}

for (const provider of ["anthropic", "openai"] as const) {
  describe(`${provider}: the task's message`, () => {
    test("an HTML error page is its status and title, not the page", async () => {
      const e = await failure(provider, { status: 502, headers: { "content-type": "text/html" }, body: PAGE });
      expect(e.attempts).toBe(FAST_RETRIES.retries + 1);
      expect(modelFailureMessage(e, false, same)).toBe('The model server answered HTTP 502 with an HTML page ("502 Bad Gateway & friends")');
    });

    test("an HTML page without a title: its status", async () => {
      const e = await failure(provider, { status: 401, headers: { "content-type": "text/html" }, body: "<html><body>Unauthorized</body></html>" });
      expect(modelFailureMessage(e, false, same)).toBe("The model server answered HTTP 401 with an HTML page");
    });

    test("a long message is cut to 1,000 characters with an ellipsis", async () => {
      const body = JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: `bad: ${"z".repeat(5000)}` } });
      const e = await failure(provider, { status: 400, headers: { "content-type": "application/json" }, body });
      const msg = modelFailureMessage(e, false, same);
      expect(msg).toHaveLength(MAX_MODEL_MESSAGE_CHARS);
      expect(msg.startsWith("bad: zzz")).toBe(true);
      expect(msg.endsWith("z…")).toBe(true);
    });

    test("a short plain-text message is kept as it is", async () => {
      const e = await failure(provider, { status: 400, headers: { "content-type": "text/plain" }, body: "upstream said no" });
      expect(modelFailureMessage(e, false, same)).toContain("upstream said no");
    });
  });
}

describe("readableModelMessage / cutText", () => {
  test("the vault's values are scrubbed before the cut: a secret across the cut is not left half there", () => {
    const secret = "sk-live-0123456789abcdefghij";
    const e = new ModelError(`${"a".repeat(990)}${secret} tail`, { provider: "openai", status: 400, retryable: false });
    const msg = modelFailureMessage(e, false, (s) => s.replaceAll(secret, "[REDACTED]"));
    expect(msg).not.toContain("sk-live-01");
    expect(msg).toContain("[RED");
  });

  test("a quiet (private) server's message is unchanged: its status only", () => {
    const e = new ModelError(PAGE, { provider: "anthropic", status: 502, retryable: true });
    expect(modelFailureMessage(e, true, same)).toBe("The model server answered HTTP 502 (its answer is not shown for servers on private networks)");
  });

  test("an HTML message without a status; a surrogate pair is not split by the cut", () => {
    expect(readableModelMessage("<html><head><title>Login</title></head></html>", undefined)).toBe('The model server answered with an HTML page ("Login")');
    expect(cutText(`${"a".repeat(8)}😀😀`, 10)).toBe(`${"a".repeat(8)}…`);
    expect(cutText("short", 10)).toBe("short");
  });
});
