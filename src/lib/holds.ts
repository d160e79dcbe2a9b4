/**
 * Hooks run before a removal (a session's delete, a workspace's removal), each of which may hold
 * something until the removal is over: the task queue holds the session, so no queued task starts
 * on what is being removed. One place runs them and releases what they hold, however it ends.
 */

/** Run before the work for `id`; may return a release, called once the work is over (or failed). */
export type HoldingHook = (id: string) => Promise<(() => void) | void>;

/** Runs `hooks` for `id` in order, then `work`; every release the hooks returned is called after it. */
export async function withHolds<T>(hooks: readonly HoldingHook[], id: string, work: () => Promise<T>): Promise<T> {
  const releases: (() => void)[] = [];
  try {
    for (const hook of hooks) {
      const release = await hook(id);
      if (release) releases.push(release);
    }
    return await work();
  } finally {
    for (const release of releases) release();
  }
}
