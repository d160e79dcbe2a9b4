/** Model providers: the registry of the three implementations, and what callers import from here. */
import { AnthropicProvider } from "./anthropic.ts";
import { DemoProvider } from "./demo.ts";
import { OpenAIProvider } from "./openai.ts";
import type { Provider, ProviderName } from "./types.ts";

export * from "./types.ts";
export { AnthropicProvider, anthropicParams, toAnthropicMessages } from "./anthropic.ts";
export { OpenAIProvider, openaiParams, toOpenAIMessages, TOOL_ERROR_PREFIX } from "./openai.ts";
export { DEMO_COMMAND, DemoProvider, demoReply } from "./demo.ts";
export { DEFAULT_RETRY_POLICY, type RetryPolicy, retryPolicy, setRetryPolicy } from "./retry.ts";

const providers: Record<ProviderName, Provider> = {
  anthropic: new AnthropicProvider(),
  openai: new OpenAIProvider(),
  demo: new DemoProvider(),
};

export function getProvider(name: ProviderName): Provider {
  const p = providers[name];
  if (!p) throw new Error(`Unknown model provider "${name}" (expected anthropic, openai or demo)`);
  return p;
}
