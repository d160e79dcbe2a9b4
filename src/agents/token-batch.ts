/**
 * Model text → `task:token` frames, coalesced per turn of the event loop. A provider's stream
 * hands over one delta per server-sent event, and one network read often carries dozens of them;
 * a frame per delta meant a scrub, a frame object, its JSON, a log row and a socket write each
 * (and the garbage of all of them). Deltas pushed while the current macrotask runs are joined and
 * sent once it is over (`setImmediate`), so nothing waits for a timer: a delta that arrives alone
 * leaves as soon as the read that brought it is handled. A batch that reaches `maxChars` is sent
 * at once, so a burst never becomes one huge frame.
 *
 * The scrubber's stream sees the joined text: a secret split across deltas is still caught, and
 * its held-back tail is only sent by `end()`.
 */
import type { StreamScrub } from "./scrub.ts";

/** Characters after which a batch is sent without waiting for the macrotask to end. */
export const TOKEN_BATCH_MAX = 16 * 1024;

export class TokenBatch {
  private pending = "";
  private scheduled: ReturnType<typeof setImmediate> | null = null;
  private readonly onTick = () => {
    this.scheduled = null;
    this.flush();
  };

  constructor(
    private readonly scrub: StreamScrub,
    private readonly send: (text: string) => void,
    private readonly maxChars = TOKEN_BATCH_MAX,
  ) {}

  push(text: string) {
    if (!text) return;
    this.pending += text;
    if (this.pending.length >= this.maxChars) this.flush();
    else this.scheduled ??= setImmediate(this.onTick);
  }

  /** Sends what is pending now (the scrubber may still hold back a tail). */
  flush() {
    if (this.scheduled) {
      clearImmediate(this.scheduled);
      this.scheduled = null;
    }
    if (!this.pending) return;
    const text = this.scrub.push(this.pending);
    this.pending = "";
    if (text) this.send(text);
  }

  /** The model's message is complete: sends everything, the scrubber's held-back tail included. */
  end() {
    this.flush();
    const tail = this.scrub.flush();
    if (tail) this.send(tail);
  }
}
