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

export class PlaybookScheduler {
  private timer: DueTimer;
  private waking = false;

  constructor(
    private playbooks: Pick<Playbooks, "due" | "nextDue" | "fireDue">,
    private log: Logger,
    private now: () => number = Date.now,
  ) {
    this.timer = new DueTimer(() => this.wake(), now);
  }

  /** Arms for the earliest due slot; slots missed while the server was down fire at once (once each). */
  start() {
    this.rearm();
  }

  rearm() {
    if (!this.waking) this.timer.reset(this.playbooks.nextDue());
  }

  /** Fires every slot due now (each claims itself synchronously), then re-arms. */
  wake() {
    if (this.waking) return;
    this.waking = true;
    const fired = new Set<string>();
    try {
      const now = this.now();
      for (;;) {
        const rows = this.playbooks.due(now, BATCH).filter((r) => !fired.has(r.id));
        for (const row of rows) {
          fired.add(row.id);
          try {
            this.playbooks.fireDue(row).catch((e) => this.log.error("playbook schedule failed", { playbook_id: row.id, err: e }));
          } catch (e) {
            this.log.error("playbook schedule failed", { playbook_id: row.id, err: e });
          }
        }
        if (rows.length < BATCH) break;
      }
    } finally {
      this.waking = false;
      this.rearm();
    }
  }

  stop() {
    this.timer.stop();
  }
}
