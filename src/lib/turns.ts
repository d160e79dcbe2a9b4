/**
 * Turn-taking on the event loop for heavy steps of many concurrent tasks. When a hundred model
 * answers end within one read of the network, each task's end (scrubbing the answer, storing it
 * in the transcript and the task, the frames that carry it) runs in its own callback — but all in
 * one turn of the event loop, so every other session's streamed text waits behind all of them
 * (measured: 100 answers of 256 KiB ending together blocked the loop for 110–300 ms). A step that
 * begins with `await nextTurn()` runs in a turn of its own: one waiter is let go per turn, and the
 * loop reads the sockets in between. Without contention it costs one `setImmediate` hop.
 *
 * Why one per turn and not simply `setImmediate` per step: immediates queued in the same turn run
 * back to back in the next one (the same stall, later); one immediate that re-arms itself after
 * each waiter lets the loop poll for I/O between them.
 */
const waiting: (() => void)[] = [];
let head = 0;
let armed = false;

function letOneGo() {
  armed = false;
  const next = waiting[head];
  if (next === undefined) return;
  waiting[head++] = undefined as never;
  if (head === waiting.length) {
    waiting.length = 0;
    head = 0;
  } else arm();
  next();
}

function arm() {
  if (armed) return;
  armed = true;
  setImmediate(letOneGo);
}

/** Resolves in a later turn of the event loop, at most one waiter per turn, first come first served. */
export function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => {
    waiting.push(resolve);
    arm();
  });
}

/** Waiters not let go yet (tests). */
export function turnsWaiting(): number {
  return waiting.length - head;
}
