/** Serialises async work per key (one lifecycle operation per workspace at a time). */
export class KeyedMutex {
  private tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = prev.then(() => mine);
    this.tails.set(key, tail);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }

  /** Settles once every operation on `key` queued so far has finished (without taking the lock). */
  async idle(key: string): Promise<void> {
    for (let tail = this.tails.get(key); tail; tail = this.tails.get(key)) await tail;
  }

  /** True while an operation on `key` runs or waits. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }
}
