/**
 * What one model request is charged to its task and session (the task's `cost_usd` is what
 * max_budget_usd and the monthly spend cap add up) and to /metrics. A request costs what the
 * provider processed, whether or not its answer finished: cancelled, stopped by a shutdown or
 * failing mid-stream, it is charged what its meter knew by then (providers/usage-meter.ts).
 *
 * The input tokens are written as soon as the provider reports them (Anthropic's message_start),
 * so a server killed mid-answer (kill -9) has at least those on the task; what only the end of
 * the call tells (the output) is written when the call ends. The writes are increments of what was
 * already charged, in order, never taking anything back.
 */
import type { AgentMetricsDep, ProfileRow } from "./deps.ts";
import { costUsd } from "./pricing.ts";
import type { Usage } from "./providers/types.ts";
import { UsageMeter } from "./providers/usage-meter.ts";
import type { AgentSessions } from "./sessions.ts";
import type { Tasks, TaskRow } from "./tasks.ts";

export class CallCharge {
  readonly meter: UsageMeter;
  private charged: Usage = { input_tokens: 0, output_tokens: 0 };
  private writes: Promise<void> = Promise.resolve();
  private failure: { e: unknown } | null = null;

  constructor(
    private readonly d: { tasks: Tasks; sessions: AgentSessions; metrics?: AgentMetricsDep },
    private readonly task: TaskRow,
    private readonly model: ProfileRow["model"],
  ) {
    this.meter = new UsageMeter(() => this.add(this.meter.used()));
  }

  /** The call ended: charges `usage` (the answer's figures; a stopped or failed call's: `meter.used()`), then /metrics once. */
  async settle(usage: Usage): Promise<void> {
    this.add(usage);
    await this.writes;
    if (this.failure) throw this.failure.e;
    const c = this.charged;
    this.d.metrics?.modelUsage(this.model.provider, c.input_tokens, c.output_tokens, costUsd(this.model, c));
  }

  /** Charges what `usage` adds to what was charged already (a write queued behind the earlier ones). */
  private add(usage: Usage) {
    const add = {
      input_tokens: Math.max(0, usage.input_tokens - this.charged.input_tokens),
      output_tokens: Math.max(0, usage.output_tokens - this.charged.output_tokens),
    };
    if (!add.input_tokens && !add.output_tokens) return;
    this.charged = { input_tokens: this.charged.input_tokens + add.input_tokens, output_tokens: this.charged.output_tokens + add.output_tokens };
    const cost = costUsd(this.model, add);
    const { tasks, sessions } = this.d;
    const { id, session_id } = this.task;
    // Caught here (and rethrown by settle): an early write's failure must not be an unhandled rejection meanwhile.
    this.writes = this.writes
      .then(async () => {
        await tasks.addUsage(id, add.input_tokens, add.output_tokens, cost);
        await sessions.addUsage(session_id, add.input_tokens, add.output_tokens, cost);
      })
      .catch((e) => {
        this.failure ??= { e };
      });
  }
}
