/**
 * Messages between the replicas sharing a PostgreSQL database: LISTEN/NOTIFY on a few channels,
 * over Bun's SQL client (one dedicated connection for every LISTEN, reconnected with backoff by the
 * driver). A message is a small JSON object carrying ids, never rows: receivers read what they need
 * from the tables. Sent inside a transaction (`notifyIn`), it is delivered only if and when that
 * transaction commits, so a receiver always finds the rows it names.
 *
 * Delivery is at most once: a message sent while a receiver's LISTEN connection is down is lost to
 * it. `listen`'s `onResync` runs after every (re)connection, so receivers catch up from the tables.
 * Messages a replica sends are not handed back to it (it acted on them already).
 *
 * On SQLite there is only one server: `LocalBus` sends nothing and never calls back.
 */
import type { SQL } from "bun";
import { sql } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import { run, type Unit } from "../db/unit.ts";

export const CHANNELS = {
  /** Frames stored (src/events/pg-log.ts): `{ b: [[session id, first seq, last seq, first debug id, last debug id], …] }`. */
  events: "runcell_events",
  /** Credentials revoked (revocations.ts): `{ token }`, `{ login }`, `{ user }` or `{ disabled }`, each an id. */
  auth: "runcell_auth",
  /** About a task's replica: `{ cancel: task id }` (to the replica running it), `{ resume: session id }` (a clean stop handed it over). */
  tasks: "runcell_tasks",
  /** A playbook schedule was made or changed (`{}`): every replica re-reads the earliest due slot. */
  schedules: "runcell_schedules",
  /** PATCH /admin/config applied on one replica: `{ patch }` (the validated body), applied live by the others. */
  config: "runcell_config",
} as const;
export type Channel = (typeof CHANNELS)[keyof typeof CHANNELS];

/** PostgreSQL's NOTIFY payload limit is 8000 bytes; ours carry ids only. */
const MAX_PAYLOAD = 7900;

export interface Bus {
  /** Whether other replicas may exist (PostgreSQL). */
  readonly shared: boolean;
  /** A statement of the caller's transaction: delivered to the other replicas if it commits. */
  notifyIn(tx: DB, channel: Channel, message: object): Unit<void>;
  /** Sends at once (outside any transaction). */
  notify(channel: Channel, message: object): Promise<void>;
  /**
   * Calls `onMessage` with each message another replica sends on the channel. `onResync` runs
   * each time the connection is (re)established after the first: messages may have been missed.
   */
  listen(channel: Channel, onMessage: (message: Record<string, unknown>) => void, onResync?: () => void): Promise<void>;
  close(): Promise<void>;
}

function envelope(from: string, message: object): string {
  const payload = JSON.stringify({ ...message, _from: from });
  if (payload.length > MAX_PAYLOAD) throw new Error(`bus message too large (${payload.length} bytes)`);
  return payload;
}

export class PgBus implements Bus {
  readonly shared = true;
  private subs: { unlisten(): Promise<void> }[] = [];

  constructor(
    private pool: SQL,
    private replicaId: string,
    private onError: (err: Error, channel: string) => void = () => {},
  ) {}

  *notifyIn(tx: DB, channel: Channel, message: object): Unit<void> {
    // PostgreSQL's drizzle object (handed out under the SQLite type, src/db/pg/client.ts) runs raw SQL with `execute`.
    const pg = tx as unknown as { execute(q: ReturnType<typeof sql>): PromiseLike<unknown> };
    yield* run(pg.execute(sql`SELECT pg_notify(${channel}, ${envelope(this.replicaId, message)})`));
  }

  async notify(channel: Channel, message: object): Promise<void> {
    await this.pool.notify(channel, envelope(this.replicaId, message));
  }

  async listen(channel: Channel, onMessage: (message: Record<string, unknown>) => void, onResync?: () => void): Promise<void> {
    let connected = false;
    const sub = await this.pool.listen(
      channel,
      (payload) => {
        let message: Record<string, unknown>;
        try {
          message = JSON.parse(payload);
        } catch {
          return; // Not ours (someone else NOTIFYing on the channel).
        }
        if (message._from === this.replicaId) return;
        try {
          onMessage(message);
        } catch (e) {
          this.onError(e as Error, channel);
        }
      },
      () => {
        if (connected) {
          try {
            onResync?.();
          } catch (e) {
            this.onError(e as Error, channel);
          }
        }
        connected = true;
      },
    );
    this.subs.push(sub);
  }

  async close(): Promise<void> {
    const subs = this.subs;
    this.subs = [];
    await Promise.allSettled(subs.map((s) => s.unlisten()));
  }
}

/** One server (SQLite): nobody to tell. */
export class LocalBus implements Bus {
  readonly shared = false;
  *notifyIn(): Unit<void> {}
  async notify(): Promise<void> {}
  async listen(): Promise<void> {}
  async close(): Promise<void> {}
}
