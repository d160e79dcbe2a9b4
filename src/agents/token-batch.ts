/**
 * Model text → `task:token` frames, coalesced per network read. A provider's stream hands over
 * one delta per server-sent event, and one network read often carries dozens of them; a frame per
 * delta meant a scrub, a frame object, its JSON, a log row and a socket write each (and the
 * garbage of all of them). The providers read the events of one read in one synchronous run
 * (providers/sse.ts): the deltas pushed during it are joined and sent in a microtask once it is
 * over, before the next read is handled — nothing waits for a timer, nor for the rest of the event
 * loop's turn (an earlier version sent at `setImmediate`: a read handled early in a busy turn then
 * waited for every other stream's reads of that turn; relay p99 at N=100 was 4.8–8.2 ms against
 * 3.7–6.6 ms now, bench/scale.ts). A batch that reaches `maxChars` is sent at once, so a burst
 * never becomes one huge frame.
 *
 * The scrubber's stream sees the joined text: a secret split across deltas is still caught, and
 * its held-back tail is only sent by `end()`.
 */
import type { StreamScrub } from "./scrub.ts";

/** Characters after which a batch is sent without waiting for the synchronous run to end. */
export const TOKEN_BATCH_MAX = 16 * 1024;

export class TokenBatch {
  private pending = "";
  private scheduled = false;
  private readonly onTick = () => {
    if (!this.scheduled) return;
    this.scheduled = false;
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
    else if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(this.onTick);
    }
  }

  /** Sends what is pending now (the scrubber may still hold back a tail). */
  flush() {
    this.scheduled = false;
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
