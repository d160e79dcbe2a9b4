/**
 * The playbook scheduler. The next due time of every enabled schedule is a row
 * (`playbooks.next_run_at`); one timer wakes at the earliest of them (src/lib/due-timer.ts), fires
 * every slot due by then, and re-arms — so thousands of schedules cost nothing between due times,
 * a restart catches up from the rows, and a change to any schedule re-arms at once.
 */
import { DueTimer } from "../lib/due-timer.ts";
import type { Logger } from "../log.ts";
import type { Playbooks } from "./service.ts";

const BATCH = 500;
const RETRY_MS = 60_000;

export class PlaybookScheduler {
  private timer: DueTimer;
  private waking = false;
  /** Counts re-arms: one that finished reading after a later one started keeps out. */
  private arms = 0;

  constructor(
    private playbooks: Pick<Playbooks, "due" | "nextDue" | "fireDue">,
    private log: Logger,
    private now: () => number = Date.now,
  ) {
    // A wake that fails (the database unreachable) is logged and tried again a minute later.
    this.timer = new DueTimer(
      () =>
        void this.wake().catch((e) => {
          this.log.error("playbook schedules not checked; trying again in a minute", { err: e });
          this.timer.reset(this.now() + RETRY_MS);
        }),
      now,
    );
  }

  /** Arms for the earliest due slot; slots missed while the server was down fire at once (once each). */
  start(): Promise<void> {
    return this.rearm();
  }

  async rearm(): Promise<void> {
    if (this.waking) return;
    const arm = ++this.arms;
    const at = await this.playbooks.nextDue();
    // A wake (which re-arms when done) or a later re-arm began meanwhile: theirs is newer.
    if (arm === this.arms && !this.waking) this.timer.reset(at);
  }

  /** Fires every slot due now (waiting until each is claimed, not for its run to start), then re-arms. */
  async wake(): Promise<void> {
    if (this.waking) return;
    this.waking = true;
    const fired = new Set<string>();
    try {
      const now = this.now();
      for (;;) {
        const rows = (await this.playbooks.due(now, BATCH)).filter((r) => !fired.has(r.id));
        for (const row of rows) fired.add(row.id);
        await Promise.all(rows.map((row) => this.playbooks.fireDue(row).catch((e) => this.log.error("playbook schedule failed", { playbook_id: row.id, err: e }))));
        if (rows.length < BATCH) break;
      }
    } finally {
      this.waking = false;
      await this.rearm();
    }
  }

  stop() {
    this.timer.stop();
  }
}
