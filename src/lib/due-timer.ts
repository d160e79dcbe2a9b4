/**
 * One timer for "the earliest of many due times" (schedules, answer timeouts): the rows hold the
 * times, the timer only wakes their owner at the earliest one, so thousands of due rows cost one
 * pending timeout and nothing in between. `arm(at)` keeps the earliest; the owner re-arms after
 * each `fire` from what its rows say then.
 */
const MAX_DELAY = 2 ** 31 - 1;

export class DueTimer {
  private timer: Timer | null = null;
  private at: number | null = null;
  private stopped = false;

  constructor(
    private fire: () => void,
    private now: () => number = Date.now,
  ) {}

  /** Wakes at `at` (or keeps an earlier wake); null keeps what is armed. */
  arm(at: number | null) {
    if (this.stopped || at === null) return;
    if (this.at !== null && this.at <= at) return;
    this.set(at);
  }

  /** Replaces the armed time (null: nothing due). */
  reset(at: number | null) {
    this.clear();
    if (!this.stopped && at !== null) this.set(at);
  }

  private set(at: number) {
    this.clear();
    this.at = at;
    const delay = Math.min(MAX_DELAY, Math.max(0, at - this.now()));
    this.timer = setTimeout(() => {
      this.timer = null;
      this.at = null;
      // A wake past the longest timeout only re-arms.
      if (at - this.now() > 0) this.set(at);
      else this.fire();
    }, delay);
    this.timer.unref?.();
  }

  private clear() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.at = null;
  }

  /** The armed time, if any. */
  get armedAt(): number | null {
    return this.at;
  }

  stop() {
    this.stopped = true;
    this.clear();
  }
}
