/**
 * One task's model ⇄ tools loop. It can start from any persisted state — a fresh task, a task
 * resumed after a restart (tool calls of the last step still pending; one that was in flight is
 * reported to the model as interrupted), or a task whose question was just answered — because
 * every step is stored before the next begins. Limits are checked before each model request.
 */
import type { Logger } from "../log.ts";
import type { RunningExec } from "../db/schema.ts";
import type { FrameInput, TaskFrameInput } from "../schema/stream.ts";
import type { Hub } from "../events/hub.ts";
import type { EventStore } from "../events/log.ts";
import { AppError, type ErrorCode } from "../lib/errors.ts";
import { isProfileGone } from "./profiles.ts";
import type { AgentMetricsDep, ProfileRow, SecretsDep, WorkspacesDep, NotificationsDep } from "./deps.ts";
import { polishResultText } from "./polish.ts";
import { CallCharge } from "./call-charge.ts";
import { getProvider } from "./providers/index.ts";
import { type ContentBlock, ModelError, type ModelResponse, type StopReason } from "./providers/types.ts";
import { TokenBatch } from "./token-batch.ts";
import { nextTurn } from "../lib/turns.ts";
import { makeScrubber, type Scrubber, scrubDeep } from "./scrub.ts";
import type { AgentSessions } from "./sessions.ts";
import type { SessionLifecycle } from "./session-lifecycle.ts";
import type { Tasks, TaskRow } from "./tasks.ts";
import { ASK_USER, invalidInput, toolByName, toolSpecs } from "./tools/index.ts";
import { flattenQuestions } from "./tools/ask.ts";
import type { StoredStep, Transcript } from "./transcript.ts";
import type { ModelRoute } from "./model-network.ts";
import { modelFailureMessage } from "./model-failure.ts";
import { CUT_OFF_RESULT, markCutOff } from "./cut-off.ts";
import { execRecorder, interruptedResult } from "./leftover-exec.ts";
import { NO_RUN_TOOLS, type RunSetup, type RunTools } from "./run-setup.ts";
import { chainPrompt, CONTINUE_TOOL, continueToolSpec, exhaustedResult, HANDOFF_MAX, handoffOf } from "./chains.ts";
import { releaseMemory } from "../lib/memory.ts";
import { roundUsd, usdReached } from "../lib/usd.ts";
import { CANCELLED_ANSWER, CANCELLED_BY_USER, stopOutcome } from "./stop.ts";

export const MAX_OUTPUT_TOKENS = 8192;
/**
 * How many times a turn's model request cut off by a restart is made again. A server that crashes
 * in the same answer every time would otherwise repeat it forever (only the budget would stop it):
 * the request is sent at most 1 + MAX_TURN_REPEATS times, and a task whose request was cut off
 * more often fails instead.
 */
export const MAX_TURN_REPEATS = 2;
/** From this size of a session's conversation (characters of JSON), a model request is followed by a collection. */
export const LARGE_REQUEST_CHARS = 8 * 1024 * 1024;

export type Outcome = "completed" | "waiting" | "cancelled" | "interrupted" | { failed: { code: ErrorCode; message: string } };

export interface LoopDeps {
  log: Logger;
  hub: Hub;
  /** Flushed before a side effect, so its tool_use frame is durable first. */
  eventLog: EventStore;
  tasks: Tasks;
  sessions: AgentSessions;
  transcript: Transcript;
  secrets: SecretsDep;
  workspaces: WorkspacesDep;
  notifications: NotificationsDep;
  now: () => number;
  /** The monthly spend cap on the server's own keys, checked before each request they pay for. */
  spend?: { assertSpend(userId: string): Promise<void> };
  /** Where the profile's model requests may go (the SSRF guard of a user's base_url). */
  modelNet?: { route(userId: string, baseUrl: string | null | undefined): Promise<ModelRoute> };
  /** /metrics: tokens and cost by provider, task durations, session.ready latency (wired by the app). */
  metrics?: AgentMetricsDep;
  /** Starts the session's workspace for a run (and announces a session never announced). */
  lifecycle: Pick<SessionLifecycle, "ensureRunning">;
  /** Repositories checked out, MCP servers connected, GitPush: the run's tools beyond the built-in ones (wired by the app). */
  setup?: Pick<RunSetup, "prepare">;
  /**
   * Whether the user has the admin role now. A turn's `task:system_prompt` is for admins, and a
   * session is read only by its owner: it is emitted only when the owner is one, so other users'
   * sequences have no gap where it would be.
   */
  isAdmin(userId: string): Promise<boolean>;
}

type ToolUse = Extract<ContentBlock, { type: "tool_use" }>;
/**
 * What a tool call did to the run: ran, paused for an answer, started a new chain, ended the run,
 * or found the task no longer running (ended elsewhere: a cancel through another replica that did
 * not reach this one) — then this loop writes nothing more.
 */
type ToolStep = "ran" | "waiting" | "gone" | { chained: number } | { ended: string };

const NOT_RUN_AFTER_CHAIN = "[not run: the run continued in a new chain (or ended) before this call]";

export class AgentLoop {
  constructor(private d: LoopDeps) {}

  private emit(task: TaskRow, frame: TaskFrameInput) {
    this.d.hub.publish(task.session_id, { task_id: task.id, ...frame } as FrameInput);
  }

  /**
   * Runs until the task completes, waits for input, or is stopped. Never throws. `resumed`: the
   * task was running before (a restart, or a replica taking it over), not just claimed or answered.
   */
  async run(task: TaskRow, profile: ProfileRow, signal: AbortSignal, resumed = false): Promise<Outcome> {
    const scrub = makeScrubber(await this.d.secrets.valuesFor(task.user_id));
    let route: ModelRoute = { quiet: false };
    try {
      route = (await this.d.modelNet?.route(task.user_id, profile.model.base_url)) ?? route;
      return await this.loop(task, profile, signal, scrub, route, resumed);
    } catch (e) {
      if (signal.aborted) return stopOutcome(signal.reason);
      if (e instanceof ModelError) return { failed: { code: "MODEL_ERROR", message: modelFailureMessage(e, route.quiet, scrub) } };
      if (e instanceof AppError) return { failed: { code: e.code, message: scrub(e.message) } };
      this.d.log.error("task crashed", { task_id: task.id, err: e });
      return { failed: { code: "INTERNAL_ERROR", message: `Internal error while running the task (task ${task.id})` } };
    } finally {
      // The task ended or waits for an answer: its session's transcript goes back to being only rows.
      this.d.transcript.release(task.session_id);
    }
  }

  /**
   * A resumed task with a model request as its next step: the request under way when the server
   * stopped is made again, so the text it had streamed (never stored as a step) leaves the log
   * first — a replay shows the answer once. Before anything of the resumed run is emitted: what is
   * removed is the task's tokens after its last other frame. Nothing to remove: nothing done.
   */
  async dropCutAnswer(task: TaskRow, steps?: StoredStep[]): Promise<void> {
    const { transcript } = this.d;
    steps ??= await transcript.steps(task.session_id);
    if (transcript.finalAnswer(steps, task.id) !== null || transcript.pendingToolUses(steps, task.id).length > 0) return;
    const dropped = await this.d.eventLog.dropCutText(task.session_id, task.id);
    if (dropped) this.d.log.info("streamed text of an interrupted model request removed before it is requested again", { task_id: task.id, frames: dropped });
  }

  private async loop(task: TaskRow, profile: ProfileRow, signal: AbortSignal, scrub: Scrubber, route: ModelRoute, resumed: boolean): Promise<Outcome> {
    const { tasks, transcript } = this.d;
    // The session's transcript is read (the first time: every row parsed) in a turn of its own.
    await nextTurn();
    // Vault or server environment; a missing key fails in the provider with a message saying how to fix it.
    // Whether it is the server's own key is decided here, from the key this run's requests go out with.
    const apiKey = await this.d.secrets.resolveApiKey(task.user_id, profile.model);
    let steps = await transcript.steps(task.session_id);
    const firstRun = !transcript.hasPrompt(steps, task.id);
    if (firstRun) {
      await transcript.addUserPrompt(task.session_id, task.id, task.prompt);
      steps = await transcript.steps(task.session_id);
    }
    // (At a start this was done before the server listened, orchestrator.ts prepareResume: found
    // nothing now. A replica taking a task over does it here.)
    if (resumed) await this.dropCutAnswer(task, steps);
    // Also announces (session.ready) a session whose opening a crash cut off.
    const workspace = await this.d.lifecycle.ensureRunning(task.session_id, profile.id);
    const extra = (await this.d.setup?.prepare(task, profile, (f) => this.emit(task, f), scrub, signal)) ?? NO_RUN_TOOLS;
    const provider = getProvider(profile.model.provider);
    const profileTools = [...toolSpecs(profile.tools), ...extra.specs];
    const system = profile.system_prompt + extra.note;
    // The turn's whole system prompt and tool list as the model gets them (the session's
    // repositories and MCP servers included), once per task, for admins.
    if (firstRun && (await this.d.isAdmin(task.user_id))) {
      this.emit(task, { type: "task:system_prompt", system_prompt: system, model: profile.model.name, provider: profile.model.provider, tools: profileTools.map((t) => t.name) });
    }
    // (Not in a turn of its own: the answer's turn already is one. Yielding here too raised the
    // peak of 24 turns of 2 MiB from 3.9x to 5.6x the largest request, bench/memory.ts part 2:
    // the collections then fell at worse moments.)
    // `stop`: why the answer that ends the turn stopped; without it (a resumed task), what was
    // stored with that answer.
    const complete = async (text: string, stop?: StopReason): Promise<Outcome> => {
      // An answer with no text of its own reports the task's last text: clients replace what they
      // streamed with result_text, which must not blank the turn out.
      const finalText = text.trim() === "" ? transcript.lastText(steps, task.id) : text;
      const resultText = polishResultText(finalText, (rel) => this.d.workspaces.signedFileUrl(workspace.id, rel));
      const done = (await tasks.byId(task.id))!;
      const stopReason = stop ?? done.stop_reason;
      await tasks.update(task.id, { result_text: resultText, stop_reason: stopReason });
      if (stopReason === "max_tokens" || stopReason === "refusal") this.logUnfinished(task, profile, stopReason);
      this.emit(task, {
        type: "turn.done",
        result_text: resultText,
        input_tokens: done.input_tokens,
        output_tokens: done.output_tokens,
        cost_usd: roundUsd(done.cost_usd),
        // (Unknown only for an answer stored by a runcell from before the field, then resumed.)
        ...(stopReason ? { stop_reason: stopReason } : {}),
      });
      // API.md: a task whose cost reaches its max_budget_usd ends failed — also when the request
      // that reached it was the last one (its answer stays the task's result_text).
      if (usdReached(done.cost_usd, done.max_budget_usd)) {
        return { failed: { code: "BUDGET_EXCEEDED", message: `Task reached max_budget_usd ($${done.max_budget_usd}) with its final answer (cost $${roundUsd(done.cost_usd)})` } };
      }
      return "completed";
    };
    // Stopped after storing its final answer, before being marked completed: no new model request.
    const answered = transcript.finalAnswer(steps, task.id);
    if (answered !== null) return complete(answered);

    for (;;) {
      // Tool calls of the last step that have no result yet (fresh, resumed, or after an answer).
      const pending = transcript.pendingToolUses(steps, task.id);
      for (let i = 0; i < pending.length; i++) {
        const use = pending[i]!;
        const step = use.name === CONTINUE_TOOL && task.max_continuations > 0 && !use.cut_off ? await this.continueChain(task, use, steps) : await this.runTool(task, profile, extra, use, signal, scrub);
        if (step === "waiting") return "waiting";
        if (step === "gone") return "interrupted";
        if (signal.aborted) throw signal.reason;
        if (step === "ran") continue;
        // A new chain starts (or the run ends): the rest of this message's calls do not run.
        for (const rest of pending.slice(i + 1)) await this.finishTool(task, rest, NOT_RUN_AFTER_CHAIN, true);
        // (The run ends on the model's ContinueInNewChain call: its answer stopped for a tool.)
        if ("ended" in step) return complete(step.ended, "tool_use");
        break;
      }
      if (pending.length) steps = await transcript.steps(task.session_id);
      // Only this loop changes the task's turns and totals while it runs: read, check, write.
      const current = (await tasks.byId(task.id))!;
      // A turn counted without a stored answer: the server stopped while its request was under way,
      // and this one makes it again. It is the same turn — not counted twice, and not refused by
      // max_turns, checked before it was first sent. The budget is checked again: what the cut
      // request cost is real. And the repeats are counted with the task (they are about restarts,
      // so the count must outlive them): a server crashing in the same answer again and again
      // stops after MAX_TURN_REPEATS of them, whatever the budget.
      const repeat = current.turns > transcript.answers(steps, task.id);
      if (!repeat && current.turns >= current.max_turns) {
        return { failed: { code: "TURN_LIMIT_EXCEEDED", message: `Task reached max_turns (${current.max_turns}) before finishing` } };
      }
      if (usdReached(current.cost_usd, current.max_budget_usd)) {
        return { failed: { code: "BUDGET_EXCEEDED", message: `Task reached max_budget_usd ($${current.max_budget_usd}) before finishing` } };
      }
      if (repeat && current.turn_repeats >= MAX_TURN_REPEATS) {
        const cut = current.turn_repeats + 1;
        this.d.log.warn("model request cut off by restarts too many times; not made again", { task_id: task.id, profile_id: profile.id, turn: current.turns, times: cut });
        return {
          failed: {
            code: "INTERNAL_ERROR",
            message: `The model request of turn ${current.turns} was cut off by server restarts ${cut} times; it is not made again (the server may be failing on this answer)`,
          },
        };
      }
      // A request on the server's key: the monthly cap is checked first (a repeated one too: it
      // spends again), and the task counts toward the spend from before it is sent (for good: one
      // such request makes it server-paid).
      if (apiKey.serverPaid) await this.d.spend?.assertSpend(task.user_id);
      await tasks.update(task.id, {
        ...(repeat ? { turn_repeats: current.turn_repeats + 1 } : { turns: current.turns + 1, turn_repeats: 0 }),
        ...(apiKey.serverPaid && !current.server_paid ? { server_paid: true } : {}),
      });

      // ContinueInNewChain is offered while the run has continuations left.
      const continuing = current.max_continuations > 0 && transcript.chains(steps, task.id) < current.max_continuations;
      // Secrets set or rotated during the task are scrubbed from here on; a token split across
      // chunks is held back until it is clear whether it begins a secret.
      scrub.add(await this.d.secrets.valuesFor(task.user_id));
      const tokens = new TokenBatch(scrub.stream(), (text) => this.emit(task, { type: "task:token", text }));
      // The request is made from the whole conversation: in a turn of its own (src/lib/turns.ts).
      await nextTurn();
      const charge = new CallCharge(this.d, task, profile.model);
      let response: ModelResponse;
      try {
        response = await provider.complete(
          {
            model: profile.model.name,
            system,
            messages: transcript.history(steps),
            tools: continuing ? [...profileTools, continueToolSpec] : profileTools,
            maxTokens: MAX_OUTPUT_TOKENS,
            baseUrl: profile.model.base_url,
            apiKey: apiKey.key,
            fetch: route.fetch,
            signal,
            meter: charge.meter,
            log: this.d.log.child({ task_id: task.id }),
          },
          (e) => {
            if (e.type === "text") tokens.push(e.text);
          },
        );
      } catch (e) {
        // Text that arrived before a failure or a cancel still leaves ahead of the outcome frame —
        // all of it: no more comes, so the scrubber's held-back tail is scrubbed and sent too.
        tokens.end();
        // Cancelled mid-answer: the user saw the answer begin (turn.done's result_text is that text),
        // and so does the model at the session's next turn — marked as cut off, not dropped. (What
        // streamed is the log's trailing text: read here, not kept per request.)
        if (signal.aborted && stopOutcome(signal.reason) === "cancelled") await this.keepCancelledAnswer(task);
        if (e instanceof ModelError) this.logFailure(task, profile, e);
        // And is paid for: the call is charged what its meter knew (also when stopped by a
        // shutdown or a lost lease — the tokens were spent whoever continues the task).
        await charge.settle(charge.meter.used()).catch((err) => this.d.log.error("usage of a stopped model request not recorded", { task_id: task.id, err }));
        throw e;
      }
      tokens.flush();
      // The answer is scrubbed and stored in a turn of its own: many answers ending together do
      // not hold the other sessions' streamed text back (src/lib/turns.ts).
      await nextTurn();
      // A large conversation leaves its request (the JSON body and its encoded copy) as garbage the
      // collector would only reach after several more such requests: collect it now, and hand the
      // freed memory back to the system — JavaScriptCore's allocator otherwise keeps the pages,
      // and the process stays at its peak (measured: 24 turns of 2 MiB, peak 6.2× → 3.7–4.4× the
      // largest request, settled 1.7× → 0.03–0.07×; bench/memory.ts).
      if (transcript.size(task.session_id) >= LARGE_REQUEST_CHARS) releaseMemory();
      tokens.end();
      const content = scrubDeep(response.content, scrub);
      markCutOff(content, response.stopReason);
      await charge.settle(response.usage);
      const uses = content.filter((b): b is ToolUse => b.type === "tool_use");
      // The answer that ends the task: why it stopped is stored before it, so a task resumed
      // between the two still reports it (the record shows it once the task is completed).
      if (uses.length === 0) await tasks.update(task.id, { stop_reason: response.stopReason });
      await transcript.addAssistant(task.session_id, task.id, content);
      steps = await transcript.steps(task.session_id);

      if (uses.length === 0) return complete(content.filter((b) => b.type === "text").map((b) => (b as { text: string }).text).join(""), response.stopReason);
    }
  }

  /** The streamed text of an answer the user cancelled, into the conversation (see the caller). */
  private async keepCancelledAnswer(task: TaskRow): Promise<void> {
    try {
      const streamed = await this.d.eventLog.trailingText(task.session_id, task.id);
      if (streamed.trim() !== "") await this.d.transcript.addAssistant(task.session_id, task.id, [{ type: "text", text: `${streamed}\n\n${CANCELLED_ANSWER}` }]);
    } catch (err) {
      this.d.log.warn("cancelled answer not kept in the conversation", { task_id: task.id, err });
    }
  }

  /**
   * One line for the operator per failed model request (after its retries): what failed, never
   * the server's answer or the key. Users of a private server see no detail (security.md); the
   * operator running it needs some. runcell's own message (a connection failure, an answer that
   * was not a stream) is kept; one holding the server's text is not.
   */
  private logFailure(task: TaskRow, profile: ProfileRow, e: ModelError) {
    this.d.log.warn("model request failed", {
      task_id: task.id,
      profile_id: profile.id,
      provider: e.provider,
      model: profile.model.name,
      status: e.status,
      type: e.type,
      attempts: e.attempts,
      after_output: e.afterOutput,
      ...(e.fromServer ? {} : { detail: e.message }),
    });
  }

  /**
   * One line for the operator when a task's answer was cut off by the output token limit or
   * refused: the user sees it on the task and under the answer, the operator may want to raise a
   * limit or look at a prompt. Never the text.
   */
  private logUnfinished(task: TaskRow, profile: ProfileRow, stopReason: StopReason) {
    this.d.log.info(stopReason === "max_tokens" ? "task answer cut off at the model's output token limit" : "task answer refused by the model", {
      task_id: task.id,
      profile_id: profile.id,
      provider: profile.model.provider,
      model: profile.model.name,
      stop_reason: stopReason,
      max_output_tokens: MAX_OUTPUT_TOKENS,
    });
  }

  /**
   * ContinueInNewChain: with a continuation left, the call's result and the next chain's first
   * message are stored together and `turn.continuing` is emitted; the loop's next model request
   * sees only the new chain. With none left, the run ends and its result says so.
   */
  private async continueChain(task: TaskRow, use: ToolUse, steps: StoredStep[]): Promise<ToolStep> {
    const max = task.max_continuations;
    this.emit(task, { type: "task:tool_use", tool: use.name, tool_use_id: use.id, input: use.input });
    const handoff = handoffOf(use.input);
    if (!handoff) {
      await this.finishTool(task, use, `Invalid input for ${CONTINUE_TOOL}: handoff must be a non-empty string of at most ${HANDOFF_MAX} characters`, true);
      return "ran";
    }
    const used = this.d.transcript.chains(steps, task.id);
    if (used >= max) {
      await this.finishTool(task, use, `Not continued: the run's ${max} continuation${max === 1 ? " is" : "s are"} used up; the run ends with this hand-off note as its result.`, false);
      return { ended: exhaustedResult(handoff, max) };
    }
    const n = used + 1;
    const output = `Continuing in a new chain (${n} of ${max}).`;
    await this.d.transcript.addChain(task.session_id, task.id, { type: "tool_result", tool_use_id: use.id, content: output }, chainPrompt(task.prompt, handoff, n, max));
    await this.d.tasks.update(task.id, { pending_tool_use_id: null });
    this.emit(task, { type: "task:tool_result", tool: use.name, tool_use_id: use.id, output, is_error: false });
    this.emit(task, { type: "turn.continuing", continuation: n, max_continuations: max });
    return { chained: n };
  }

  /** Runs one tool call and stores its result ("waiting": the task now waits for an answer). */
  private async runTool(task: TaskRow, profile: ProfileRow, extra: RunTools, use: ToolUse, signal: AbortSignal, scrub: Scrubber): Promise<ToolStep> {
    const { tasks } = this.d;
    const current = (await tasks.byId(task.id))!;
    if (current.pending_tool_use_id === use.id && use.name !== ASK_USER) {
      // It was running when the server stopped: what is left of its command is killed first.
      return this.finishTool(task, use, await interruptedResult(this.d.workspaces, current.running_exec, (err) => this.d.log.warn("leftover command of an interrupted tool call not stopped", { task_id: task.id, err })), true);
    }
    const isExtra = extra.has(use.name);
    const enabled = profile.tools.includes(use.name) || isExtra;
    // A call cut off by the token limit is never run, whatever it is (not even a question asked).
    const invalid = use.cut_off ? CUT_OFF_RESULT : !enabled ? null : isExtra ? extra.invalid(use.name, use.input) : invalidInput(use.name, use.input);
    if (use.name === ASK_USER && enabled && !invalid) {
      const questions = flattenQuestions(use.input);
      const asking = current.pending_tool_use_id !== use.id;
      const dueAt = current.answer_timeout_ms ? (asking ? this.d.now() + current.answer_timeout_ms : current.answer_due_at) : null;
      // The status first: whoever sees the question can answer it at once — only if the task still
      // runs (a task ended elsewhere must not come back waiting for an answer).
      if (!(await tasks.updateIf(task.id, { status: "waiting_input", pending_tool_use_id: use.id, answer_due_at: dueAt }, "running"))) return "gone";
      if (asking) {
        this.emit(task, { type: "task:tool_use", tool: use.name, tool_use_id: use.id, input: use.input });
        this.emit(task, { type: "task:ask_user", questions });
      }
      // Nobody watches a scheduled or triggered run: its owner hears of the question on the webhook.
      if (asking && (task.trigger === "schedule" || task.trigger === "hook")) await this.notifyQuestion(task, questions, dueAt);
      await this.d.eventLog.flush();
      return "waiting";
    }
    this.emit(task, { type: "task:tool_use", tool: use.name, tool_use_id: use.id, input: use.input });
    if (invalid) return this.finishTool(task, use, invalid, true);
    if (!enabled) return this.finishTool(task, use, `Tool ${use.name} is not enabled for this agent (enabled: ${[...profile.tools, ...extra.specs.map((t) => t.name)].join(", ")})`, true);
    // Durable before side effects: the tool_use frame and the in-flight marker.
    await tasks.update(task.id, { pending_tool_use_id: use.id, running_exec: null });
    await this.d.eventLog.flush();
    const recorder = execRecorder(tasks, task.id, (err) => this.d.log.warn("running command of a tool call not recorded", { task_id: task.id, err }));
    const tool = isExtra ? null : toolByName(use.name)!;
    // The workspace resolves the vault at every exec: a secret set or rotated since the model
    // request (or during the command) must be scrubbed from this output too.
    scrub.add(await this.d.secrets.valuesFor(task.user_id));
    let output: string;
    let isError: boolean;
    try {
      const r = tool
        ? await tool.run(use.input, {
            userId: task.user_id,
            sessionId: task.session_id,
            taskId: task.id,
            signal,
            workspace: this.d.workspaces,
            onExec: recorder.onExec,
            notify: (n) =>
              this.d.notifications.enqueue({ userId: task.user_id, source: "agent", message: n.message, urgency: n.urgency, taskId: task.id, playbookId: task.playbook_id }),
          })
        : await extra.run({ id: use.id, name: use.name, input: use.input }, signal);
      output = r.output;
      isError = r.isError;
    } catch (e) {
      await recorder.settled();
      if (signal.aborted) return this.stopTool(task, use, signal, "", recorder.last());
      // The workspace failed, or the profile went (no environment to run with): the task ends.
      if (e instanceof AppError && (e.code === "CONTAINER_FAILED" || isProfileGone(e))) throw e;
      if (!(e instanceof AppError)) throw e;
      output = e.message;
      isError = true;
    }
    // (The record is written before the result clears it.)
    await recorder.settled();
    scrub.add(await this.d.secrets.valuesFor(task.user_id));
    if (signal.aborted) return this.stopTool(task, use, signal, scrub(output), recorder.last());
    return this.finishTool(task, use, scrub(output), isError);
  }

  private async notifyQuestion(task: TaskRow, questions: { question: string }[], dueAt: number | null) {
    const asked = questions.map((q) => q.question).join(" / ");
    const until = dueAt ? ` It fails if unanswered by ${new Date(dueAt).toISOString()}.` : "";
    await this.d.notifications.enqueue({
      userId: task.user_id,
      source: "platform",
      urgency: "high",
      taskId: task.id,
      playbookId: task.playbook_id,
      message: `Playbook run ${task.id} is waiting for your answer: ${asked} — answer with POST /v1/tasks/${task.id}/answer or in the dashboard.${until}`,
    });
  }

  /**
   * The task was stopped while a tool ran. Cancelled: the tool's result says so. Server shutdown
   * (or the lease lost): the call stays pending, and the resumed task reports it to the model as
   * interrupted — after a shutdown, with the output its command had printed (kept on the task's
   * `running_exec`; a lost lease writes nothing: the task is another replica's now).
   */
  private async stopTool(task: TaskRow, use: ToolUse, signal: AbortSignal, partial: string, exec: RunningExec | null): Promise<never> {
    if (stopOutcome(signal.reason) === "cancelled") {
      await this.finishTool(task, use, `${partial ? partial + "\n" : ""}${CANCELLED_BY_USER}`, true);
    } else if (signal.reason === "shutdown" && exec) {
      await this.d.tasks
        .update(task.id, { running_exec: { ...exec, stopped_output: partial } })
        .catch((err) => this.d.log.warn("output of a command stopped at shutdown not kept", { task_id: task.id, err }));
    }
    throw signal.reason;
  }

  private async finishTool(task: TaskRow, use: ToolUse, output: string, isError: boolean): Promise<"ran"> {
    await this.d.transcript.addToolResult(task.session_id, task.id, { type: "tool_result", tool_use_id: use.id, content: output, ...(isError ? { is_error: true } : {}) });
    await this.d.tasks.update(task.id, { pending_tool_use_id: null, running_exec: null });
    this.emit(task, { type: "task:tool_result", tool: use.name, tool_use_id: use.id, output, is_error: isError });
    return "ran";
  }
}
