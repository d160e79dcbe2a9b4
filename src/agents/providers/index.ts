/** Model providers: the interface, the three implementations, retries and their errors. */
export * from "./types.ts";
export { AnthropicProvider, anthropicParams, toAnthropicMessages } from "./anthropic.ts";
export { OpenAIProvider, openaiParams, toOpenAIMessages, TOOL_ERROR_PREFIX } from "./openai.ts";
export { DEMO_COMMAND, DemoProvider, demoReply } from "./demo.ts";
export { DEFAULT_RETRY_POLICY, type RetryPolicy, retryPolicy, setRetryPolicy } from "./retry.ts";
