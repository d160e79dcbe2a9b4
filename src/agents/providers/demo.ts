/**
 * The demo model: offline, no key, deterministic. It exercises the whole pipeline on a first run:
 * for a new prompt it streams a short text and calls `Bash` once (only when the profile enables
 * Bash; otherwise it just answers); once that tool result is in the conversation it streams a
 * final answer, word by word, quoting the command's output. Usage figures are derived from
 * character counts (≈ 4 characters a token), so costs and limits behave like a real model's.
 */
import { abortError } from "./model-error.ts";
import type { ChatMessage, ContentBlock, ModelRequest, ModelResponse, Provider, StreamEvent } from "./types.ts";

export const DEMO_COMMAND = 'echo "Hello from your runcell workspace" && uname -a && ls -la';
export const DEMO_TOOL_ID_PREFIX = "toolu_demo_";
const QUOTE_MAX_LINES = 12;
const QUOTE_MAX_CHARS = 1200;
const FIX = "To have a real model work on your tasks, set the profile's model to `anthropic` or `openai` and give it an API key.";

const tokens = (s: string) => Math.ceil(s.length / 4);

/** Splits text into words with their trailing whitespace (concatenating them gives the text back). */
export function words(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

function lastPrompt(messages: ChatMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== "user") continue;
    const text = m.content
      .filter((b) => b.type === "text")
      .map((b) => (b as { text: string }).text)
      .join(" ")
      .trim();
    if (text) return text;
  }
  return "";
}

function quote(output: string): string {
  const all = output.replace(/\r\n/g, "\n").replace(/\n+$/, "");
  let body = all.split("\n").slice(0, QUOTE_MAX_LINES).join("\n");
  if (body.length > QUOTE_MAX_CHARS) body = body.slice(0, QUOTE_MAX_CHARS);
  return "```\n" + body.replace(/```/g, "'''") + (body.length < all.length ? "\n…" : "") + "\n```";
}

/** What the demo answers to this conversation: text, and the tool call if any. */
export function demoReply(req: ModelRequest): { text: string; tool: { id: string; name: string; input: Record<string, unknown> } | null } {
  const last = req.messages[req.messages.length - 1];
  // The result of its call answers it only when nothing follows it: a cancelled call's result with
  // the user's next prompt after it in the same message is a new prompt.
  const result = last?.role === "user" ? last.content[last.content.length - 1] : undefined;
  if (result?.type === "tool_result") {
    const how = result.is_error ? "The command failed inside your workspace container. It reported:" : "The command ran inside your workspace container. It printed:";
    return {
      text:
        `${how}\n\n${quote(result.content)}\n\n` +
        "That was the whole agent pipeline: the model streamed text, called the `Bash` tool, the tool ran in your container, " +
        `and its output came back to the model, which wrote this answer. ${FIX}`,
      tool: null,
    };
  }
  const prompt = lastPrompt(req.messages);
  const said = prompt ? ` You said: “${prompt.length > 120 ? prompt.slice(0, 120) + "…" : prompt}”.` : "";
  const intro = `Hi! I'm runcell's built-in demo model: I run offline, need no API key and always answer the same way.${said}`;
  if (!req.tools.some((t) => t.name === "Bash")) {
    return { text: `${intro} This profile does not enable the \`Bash\` tool, so I can only answer in text. ${FIX}`, tool: null };
  }
  return {
    text: `${intro} Let me show you what an agent does by running a command in your workspace.`,
    tool: { id: `${DEMO_TOOL_ID_PREFIX}${String(req.messages.length).padStart(4, "0")}`, name: "Bash", input: { command: DEMO_COMMAND, description: "Say hello and show the workspace" } },
  };
}

export class DemoProvider implements Provider {
  readonly name = "demo" as const;
  /** `wordDelayMs` paces the words (0 by default: tests and first runs stay fast). */
  constructor(private readonly opts: { wordDelayMs?: number } = {}) {}

  async complete(req: ModelRequest, onEvent: (e: StreamEvent) => void): Promise<ModelResponse> {
    const { signal } = req;
    if (signal?.aborted) throw abortError(signal);
    const { text, tool } = demoReply(req);
    const input = tokens(req.system) + tokens(JSON.stringify(req.messages)) + tokens(JSON.stringify(req.tools));
    req.meter?.reported(input, 0);
    const delay = this.opts.wordDelayMs ?? 0;
    for (const w of words(text)) {
      if (delay > 0) await Bun.sleep(delay);
      if (signal?.aborted) throw abortError(signal);
      req.meter?.received(w.length);
      onEvent({ type: "text", text: w });
    }
    const content: ContentBlock[] = [{ type: "text", text }];
    if (tool) {
      onEvent({ type: "tool_use", ...tool });
      content.push({ type: "tool_use", ...tool });
    }
    return {
      content,
      stopReason: tool ? "tool_use" : "end_turn",
      usage: { input_tokens: input, output_tokens: tokens(text) + (tool ? tokens(JSON.stringify(tool.input)) : 0) },
    };
  }
}
