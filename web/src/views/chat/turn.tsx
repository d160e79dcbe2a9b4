/** One task in the transcript: the prompt, tool cards, questions, the text (streamed, then the result), usage, end. */
import { Component } from "preact";
import { useMemo, useRef, useState } from "preact/hooks";
import { renderMarkdown } from "../../lib/markdown.ts";
import { Friendly } from "../../components/feedback.tsx";
import { duration, int, usd } from "../../lib/format.ts";
import { BlockSplitter } from "./blocks.ts";
import "./chat.css";
import type { Ask, Part, ToolCall, Turn } from "./model.ts";

/** Over this many characters a streaming block is shown as plain text until it is complete (markdown of megabytes per frame would stall the page). */
const STREAM_MARKDOWN_MAX = 64 * 1024;

/**
 * One markdown block, rendered again only when its text changed — or, for a block with an image,
 * whether it is streamed text (at turn.done the result's unchanged blocks keep their DOM).
 */
class Block extends Component<{ text: string; streamed: boolean }> {
  override shouldComponentUpdate(next: { text: string; streamed: boolean }) {
    return next.text !== this.props.text || (next.streamed !== this.props.streamed && next.text.includes("!["));
  }
  override render({ text, streamed }: { text: string; streamed: boolean }) {
    return <div class="md-block" dangerouslySetInnerHTML={{ __html: renderMarkdown(text, { streamed }) }} />;
  }
}

/**
 * Markdown rendered block by block (see blocks.ts): a growing text costs only its last block per
 * frame. `streamed`: the text streamed before the turn's result (its relative images wait for it).
 */
function Markdown({ text, streaming, streamed }: { text: string; streaming: boolean; streamed: boolean }) {
  const splitter = useMemo(() => new BlockSplitter(), []);
  const blocks = splitter.split(text);
  return (
    <div class="md">
      {blocks.map((b, i) => (streaming && i === blocks.length - 1 && b.length > STREAM_MARKDOWN_MAX ? <pre key={`pre${i}`} class="stream">{b}</pre> : <Block key={i} text={b} streamed={streamed} />))}
    </div>
  );
}

/**
 * What a card's summary says: the platform's setup steps (tool_use ids "setup_…": a repository
 * cloned, an MCP server that failed to start) in words; a tool call as its name and main input
 * (an MCP tool, mcp__<server>__<tool>, its input as JSON).
 */
function describe({ id, tool, input: i }: ToolCall): { step?: string; summary?: string } {
  if (tool === "GitClone") return { step: `Cloning ${i.url}${i.ref ? ` (${i.ref})` : ""} into ${i.path}` };
  if (id.startsWith("setup_") && tool.startsWith("mcp__")) return { step: `Starting MCP server ${String(i.server ?? tool.slice(5))}` };
  if (tool === "Bash") return { summary: String(i.command ?? "") };
  return { summary: tool.startsWith("mcp__") ? JSON.stringify(i) : String(i.path ?? i.file_path ?? "") };
}

function ToolCard({ call }: { call: ToolCall }) {
  const { step, summary = "" } = describe(call);
  return (
    <details class={`tool${call.isError ? " failed" : ""}${call.output === null ? " pending" : ""}`}>
      <summary>
        {step ? (
          <span class="tool-summary">{step}</span>
        ) : (
          <>
            <span class="tool-name">{call.tool}</span> <code class="tool-summary">{summary.slice(0, 120)}</code>
          </>
        )}
        <span class="meta">{call.output === null ? "running…" : call.isError ? "error" : call.ms !== null ? duration(call.ms) : "done"}</span>
      </summary>
      <h4>Input</h4>
      <pre>{JSON.stringify(call.input, null, 2)}</pre>
      {call.output !== null && (
        <>
          <h4>{call.isError ? "Error" : "Output"}</h4>
          <pre>{call.output}</pre>
        </>
      )}
    </details>
  );
}

/**
 * The answer to several questions (or to one with several picks), in the one text the tool result
 * is: one line per question, "Question: answer", the picks of a question joined with ", " (a
 * single question's answer is its picks alone).
 */
export function formatAnswer(questions: Ask["questions"], picked: string[][]): string {
  const answerOf = (i: number) => (picked[i] ?? []).join(", ");
  if (questions.length === 1) return answerOf(0);
  return questions.map((q, i) => `${q.question}: ${answerOf(i)}`).join("\n");
}

/** Radio groups of different cards must not share a name. */
let cards = 0;

/**
 * A question card. One question with a single choice: an option's button answers it. Several
 * questions, or several picks allowed: a choice per question, then one Answer. Or a typed answer.
 * The card is disabled as soon as an answer is sent (again usable if it is refused).
 */
function AskCard({ ask, onAnswer }: { ask: Ask; onAnswer: (answer: string, refused: () => void) => void }) {
  const [text, setText] = useState("");
  const [picked, setPicked] = useState<string[][]>(() => ask.questions.map(() => []));
  const [sent, setSent] = useState(false);
  // (A double click's second click comes before the card is drawn disabled.)
  const sending = useRef(false);
  const name = useMemo(() => `ask${++cards}`, []);
  const answered = ask.answer !== null;
  const oneClick = ask.questions.length === 1 && !ask.multi[0];
  const give = (answer: string) => {
    if (sending.current) return;
    sending.current = true;
    setSent(true);
    onAnswer(answer, () => {
      sending.current = false;
      setSent(false);
    });
  };
  const pick = (i: number, label: string, on: boolean) =>
    setPicked((all) => all.map((p, j) => (j !== i ? p : !ask.multi[i] ? (on ? [label] : []) : on ? [...p.filter((l) => l !== label), label] : p.filter((l) => l !== label))));
  const complete = picked.every((p) => p.some((l) => l.trim()));
  return (
    <fieldset class="ask" disabled={answered || sent}>
      <legend>The agent asks</legend>
      {oneClick ? (
        ask.questions.map((q, i) => (
          <div key={i} class="question">
            <p>{q.question}</p>
            <div class="options">
              {q.options.map((o) => (
                <button type="button" key={o.label} onClick={() => give(o.label)}>
                  {o.label}
                </button>
              ))}
            </div>
          </div>
        ))
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            if (complete) give(formatAnswer(ask.questions, picked));
          }}
        >
          {ask.questions.map((q, i) => (
            <fieldset key={i} class="question">
              <legend>{q.question}</legend>
              {q.options.length === 0 ? (
                <label>
                  <span class="sr-only">{q.question}</span>
                  <input value={picked[i]![0] ?? ""} onInput={(e) => pick(i, (e.currentTarget as HTMLInputElement).value, true)} />
                </label>
              ) : (
                <div class="options">
                  {q.options.map((o) => (
                    <label key={o.label} class="option">
                      <input
                        type={ask.multi[i] ? "checkbox" : "radio"}
                        name={`${name}q${i}`}
                        checked={picked[i]!.includes(o.label)}
                        onChange={(e) => pick(i, o.label, (e.currentTarget as HTMLInputElement).checked)}
                      />{" "}
                      {o.label}
                    </label>
                  ))}
                </div>
              )}
            </fieldset>
          ))}
          {!answered && (
            <button type="submit" class="primary" disabled={!complete}>
              Send answers
            </button>
          )}
        </form>
      )}
      {answered ? (
        <p class="meta answered">Answered: {ask.answer}</p>
      ) : (
        <form
          class="row"
          onSubmit={(e) => {
            e.preventDefault();
            if (text.trim()) give(text.trim());
          }}
        >
          <label class="grow">
            <span class="sr-only">Your answer</span>
            <input value={text} onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)} placeholder="Or type an answer…" />
          </label>
          <button type="submit">Answer</button>
        </form>
      )}
    </fieldset>
  );
}

function PartView({ part, streaming, onAnswer }: { part: Part; streaming: boolean; onAnswer: (a: string, refused: () => void) => void }) {
  switch (part.kind) {
    case "text":
      return <Markdown text={part.text} streaming={streaming} streamed={part.result !== true} />;
    case "tool":
      return <ToolCard call={part.call} />;
    case "ask":
      return <AskCard ask={part.ask} onAnswer={onAnswer} />;
    case "chain":
      return (
        <p class="chain" role="note">
          Continuing in a new chain ({part.continuation} of {part.max})
        </p>
      );
  }
}

/** What a turn's end says when its answer did not end on its own (the task record's stop_reason). */
const UNFINISHED: Record<string, string> = {
  max_tokens: "Cut off at the model's output limit: this answer is incomplete.",
  refusal: "The model declined to answer.",
};

interface TurnProps {
  turn: Turn;
  version: number;
  onAnswer: (taskId: string, answer: string, refused: () => void) => void;
  onCancel: (taskId: string) => void;
}

/** Re-renders only when its turn's version moved. */
export class TurnView extends Component<TurnProps> {
  override shouldComponentUpdate(next: TurnProps) {
    return next.version !== this.props.version || next.turn !== this.props.turn;
  }

  override render({ turn, onAnswer, onCancel }: TurnProps) {
    const live = turn.status === "running" || turn.status === "waiting";
    // The interface's client rule: at turn.done the streamed text gives way to result_text. The
    // result takes the key of the last streamed text when that ends the turn, so the blocks that
    // did not change keep their DOM.
    const key = (p: Part, i: number) => (p.kind === "tool" ? `tool:${p.call.id}` : `${p.kind}:${i}`);
    const last = turn.parts.length - 1;
    const keyed = turn.parts.map((p, i) => [key(p, i), p] as const);
    // A cancelled turn's result_text is what it had streamed: its parts stay as they were shown
    // (text between its tool calls included), in their order.
    const replaced = turn.result !== null && turn.status !== "cancelled";
    const parts = replaced ? keyed.filter(([, p]) => p.kind !== "text") : keyed;
    if (replaced) parts.push([turn.parts[last]?.kind === "text" ? key(turn.parts[last]!, last) : "result", { kind: "text", text: turn.result!, result: true }]);
    return (
      <article class="turn" aria-label={`Turn ${turn.taskId}`}>
        {turn.prompt !== null && (
          <div class="msg user">
            <p>{turn.prompt}</p>
          </div>
        )}
        <div class="msg agent">
          {parts.map(([k, p]) => (
            <PartView key={k} part={p} streaming={live} onAnswer={(a, refused) => onAnswer(turn.taskId, a, refused)} />
          ))}
          {live && turn.parts.length === 0 && <p class="meta">Working…</p>}
          {turn.stopReason && UNFINISHED[turn.stopReason] && (
            <p class="notice" role="note">
              {UNFINISHED[turn.stopReason]}
            </p>
          )}
          {turn.error && (
            <p class="error" role="alert">
              <strong>{turn.error.code}</strong>: <Friendly text={turn.error.message} />
            </p>
          )}
          <footer class="meta">
            {turn.usage && (
              <span>
                {int(turn.usage.input)} in · {int(turn.usage.output)} out · {usd(turn.usage.cost)}
              </span>
            )}
            {turn.status === "cancelled" && <span>{turn.usage ? " · " : ""}cancelled</span>}
            {live && (
              <button type="button" class="link" onClick={() => onCancel(turn.taskId)}>
                Cancel
              </button>
            )}
          </footer>
        </div>
      </article>
    );
  }
}
