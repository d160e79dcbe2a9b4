/**
 * The provider interface the agent loop is written against. A provider turns one request (system
 * prompt, conversation, tool specs) into one streamed assistant message: text deltas and completed
 * tool calls go to `onEvent` as they arrive, and the whole message comes back at the end.
 *
 * Implementations: ./anthropic.ts (Messages API), ./openai.ts (Chat Completions, any compatible
 * base_url), ./demo.ts (offline, deterministic); the registry is ./index.ts. Retries live in
 * ./retry.ts.
 */
import type { Logger } from "../../log.ts";
import type { StopReason } from "../../db/schema.ts";
import type { ProviderName } from "./model-error.ts";
import type { Usage, UsageMeter } from "./usage-meter.ts";

export type { Usage } from "./usage-meter.ts";

export { abortError, isAbortError, ModelError, type ModelErrorInit, type ProviderName } from "./model-error.ts";

export type ContentBlock =
  | {
      type: "text";
      text: string;
      /**
       * Set by the OpenAI provider on a refusal's text (`delta.refusal`): it is sent back in the
       * assistant message's `refusal` field, not as its content (./openai.ts). Other providers send it as text.
       */
      refusal?: true;
    }
  | {
      type: "tool_use";
      id: string;
      name: string;
      input: Record<string, unknown>;
      /** Set by the loop when the output token limit cut this call's arguments off: it is not run (../cut-off.ts). Never sent to a model. */
      cut_off?: true;
    }
  | { type: "tool_result"; tool_use_id: string; content: string; is_error?: boolean };

export interface ChatMessage {
  role: "user" | "assistant";
  content: ContentBlock[];
}

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema object. */
  input_schema: Record<string, unknown>;
}

export interface ModelRequest {
  model: string;
  system: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  maxTokens: number;
  /** Compatible server to talk to instead of the provider's own (profile `model.base_url`). */
  baseUrl?: string | null;
  /** Falls back to ANTHROPIC_API_KEY / OPENAI_API_KEY from the server's environment. */
  apiKey?: string | null;
  /** How requests go out (the SSRF-guarded fetch for a user's base_url); default: global fetch. */
  fetch?: typeof fetch;
  /** Aborting stops the stream (and any retry wait) promptly; `complete` then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Kept up to date while the answer streams: what a stopped or failed request is charged (./usage-meter.ts). */
  meter?: UsageMeter;
  /** Where the provider's warnings go (a usage figure it could not read: ./token-count.ts); default: none. */
  log?: Logger;
}

export type StreamEvent =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> };

/** The provider's stop reason mapped to runcell's names (the values: STOP_REASONS in src/db/schema.ts). */
export type { StopReason };

export interface ModelResponse {
  /** The full assistant message (text + tool_use blocks, in order). */
  content: ContentBlock[];
  stopReason: StopReason;
  usage: Usage;
}

export interface Provider {
  readonly name: ProviderName;
  /** Streams one model response; calls onEvent for each text delta (as it arrives) and each completed tool call. */
  complete(req: ModelRequest, onEvent: (e: StreamEvent) => void): Promise<ModelResponse>;
}
