/**
 * The delivery worker. Woken by inserts (enqueue), by finished attempts, by a timer set to the next
 * stored due time, and by croner every few seconds as a backstop. Each pass is one transaction:
 * it writes the outcomes of the attempts that finished since the last pass, then claims due rows
 * (leased, attempt count raised first) up to CONCURRENCY attempts in flight, as the fairness
 * rules allow (below, and claimSql in outbox.ts). Nothing of the outbox lives only in memory: the
 * rows say what is due and when, so a restart (even after kill -9) picks up where it stopped; an
 * outcome not yet written when the process dies is an attempt still in flight.
 *
 * Fairness, so that receivers that hang until the timeout cannot starve the others:
 * - at most PER_INTEGRATION attempts in flight per integration;
 * - an integration whose latest attempt failed (timeout, network error, any non-2xx) is *failing*
 *   until one of its attempts is delivered: 1 attempt in flight at most. Remembered in memory
 *   only (a restart starts with none failing; the next failure marks it again);
 * - RESERVED_SLOTS stay for first attempts: an integration's 2nd and further attempt in flight,
 *   and any attempt to a failing one, start only while more than RESERVED_SLOTS slots stay free.
 */
import { Cron } from "croner";
import type { Logger } from "../log.ts";
import { USER_AGENT } from "../version.ts";
import { attempt, type Outcome } from "./deliver.ts";
import type { NetworkPolicy } from "../lib/ssrf.ts";
import type { Integrations } from "./integrations.ts";
import type { Claimed, Fairness, Outbox, Settlement } from "./outbox.ts";
import { DELIVERY_HEADER, SIGNATURE_HEADER, signatureHeader } from "./sign.ts";

export interface WebhookSchedule {
  /** Attempts per notification (default 3). */
  attempts: number;
  /** Waits after failed attempts 1, 2, 3…; the last one repeats. */
  backoffMs: number[];
  timeoutMs: number;
}

/** Attempts in flight on this server at most. */
export const CONCURRENCY = 32;
/**
 * Attempts in flight per integration on this server at most: a receiver that hangs until the
 * timeout holds this many slots, not all of them, so other users' deliveries go out at once.
 */
export const PER_INTEGRATION = 4;
/**
 * Slots kept for a webhook's first attempt in flight: failing webhooks together, and the extra
 * attempts of busy ones, hold at most CONCURRENCY − RESERVED_SLOTS, so a webhook with nothing in
 * flight that has not just failed finds a slot at once.
 */
export const RESERVED_SLOTS = 8;
/** Backstop wake-up (seconds field of a croner pattern). */
export const SWEEP_PATTERN = "*/5 * * * * *";
/** Longest a timer sleeps before re-reading the table. */
const MAX_SLEEP_MS = 60_000;

/** The wait after failed attempt number `n` (1-based). */
export function waitAfter(schedule: WebhookSchedule, n: number): number {
  const b = schedule.backoffMs;
  return b[Math.min(n - 1, b.length - 1)] ?? 0;
}

export class DeliveryWorker {
  private running = false;
  private scheduled = false;
  /** The pass under way (start's lease release, or a tick): passes never overlap. */
  private pass: Promise<void> | null = null;
  /** A wake-up came during a pass: another pass follows it. */
  private again = false;
  private timer: Timer | null = null;
  private timerAt = Infinity;
  private cron: Cron | null = null;
  private inflight = new Map<string, Promise<void>>();
  /** Attempts in flight per integration (the claim's cap counts them; see Fairness.busy). */
  private busyPer = new Map<string, number>();
  /** Outcomes waiting for the next pass to write them. */
  private settled: Settlement[] = [];
  /** Controllers of the attempts in flight (aborted at shutdown). */
  private controllers = new Set<AbortController>();
  /** Integrations whose latest finished attempt failed, until one of theirs is delivered. */
  private failingIds = new Set<string>();
  /** Called once each finished attempt's outcome is written (the benchmark observes progress). */
  onSettled: ((id: string, outcome: Settlement["kind"]) => void) | null = null;
  /** Told each written outcome and the attempt's number (the /metrics counters; wired by the app). */
  onOutcome: ((outcome: Settlement["kind"], attempt: number) => void) | null = null;

  constructor(
    private deps: {
      outbox: Outbox;
      integrations: Integrations;
      log: Logger;
      now: () => number;
      schedule: WebhookSchedule;
      net: NetworkPolicy;
      /** Extra trusted CA for https receivers (tests). */
      ca?: string;
    },
  ) {}

  get leaseMs(): number {
    return this.deps.schedule.timeoutMs + 30_000;
  }

  async start() {
    if (this.running) return;
    this.running = true;
    // Before any claim: releasing after a claim of ours would void that lease (a double delivery).
    // (On PostgreSQL only leases that ran out are released: other servers may hold live ones.)
    const release = this.deps.outbox.releaseStaleLeases(this.deps.now());
    this.pass = release.then(
      () => {},
      () => {},
    );
    try {
      const released = await release;
      if (released) this.deps.log.info("notification deliveries resumed after a restart", { count: released });
    } finally {
      this.pass = null;
      this.again = false; // the sweep below wakes the worker
    }
    this.cron = new Cron(SWEEP_PATTERN, { unref: true, protect: true }, () => this.sweep());
    await this.sweep();
  }

  /** Fails rows whose last attempt never reported back, then wakes the worker. */
  private async sweep() {
    try {
      const n = await this.deps.outbox.abandonSpent(this.deps.now());
      if (n) this.deps.log.warn("notifications failed: their last attempt was interrupted", { count: n });
    } catch (e) {
      this.deps.log.error("notification sweep failed", { err: e });
    }
    this.wake();
  }

  /** Asks for a pass over the outbox soon (coalesced; a no-op while stopped). */
  wake() {
    if (!this.running || this.scheduled) return;
    this.scheduled = true;
    // setImmediate, not a microtask: attempts finishing in the same I/O turn share one pass.
    setImmediate(() => {
      this.scheduled = false;
      if (this.pass) {
        this.again = true;
        return;
      }
      this.pass = this.tick().finally(() => {
        this.pass = null;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
    });
  }

  private async tick() {
    if (!this.running) return;
    const { outbox, now } = this.deps;
    const settled = this.settled.splice(0);
    let claimed: Claimed[] = [];
    try {
      claimed = await outbox.step(settled, now(), CONCURRENCY - this.inflight.size, this.leaseMs, this.fairness());
    } catch (e) {
      // Rows stay leased; the lease expires (or the next start releases it) and they are retried.
      this.deps.log.error("writing notification outcomes failed", { err: e, outcomes: settled.length });
    }
    for (const f of settled) {
      this.onSettled?.(f.c.id, f.kind);
      this.onOutcome?.(f.kind, f.c.attempt);
    }
    for (const c of claimed) {
      const iid = c.integration_id;
      if (iid) this.busyPer.set(iid, (this.busyPer.get(iid) ?? 0) + 1);
      // finally() runs after set() even when run() settles synchronously.
      const p = this.run(c).finally(() => {
        this.inflight.delete(c.id);
        if (iid) {
          const left = this.busyPer.get(iid)! - 1;
          if (left > 0) this.busyPer.set(iid, left);
          else this.busyPer.delete(iid);
        }
        this.wake();
      });
      this.inflight.set(c.id, p);
    }
    // Saturated: finishing attempts wake us. Otherwise sleep until the next stored due time.
    if (this.inflight.size < CONCURRENCY) await this.armTimer();
  }

  private fairness(): Fairness {
    return { perIntegration: PER_INTEGRATION, failing: [...this.failingIds], reserved: RESERVED_SLOTS, busy: this.busyPer };
  }

  private async armTimer() {
    let at: number | null = null;
    try {
      at = await this.deps.outbox.nextDueAt(this.fairness(), CONCURRENCY - this.inflight.size);
    } catch {
      at = null;
    }
    if (!this.running) return;
    const target = at == null ? Infinity : at;
    if (this.timer && target >= this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Infinity;
    if (target === Infinity) return;
    const delay = Math.min(Math.max(0, target - this.deps.now()), MAX_SLEEP_MS);
    this.timerAt = target;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.wake();
    }, delay);
  }

  private async run(c: Claimed): Promise<void> {
    const { integrations, log, now, schedule } = this.deps;
    const startedAt = now();
    const t0 = performance.now();
    // Registered before anything is awaited, so a shutdown from now on cuts this attempt short.
    const controller = new AbortController();
    this.controllers.add(controller);
    let outcome: Outcome;
    let deleted = false;
    try {
      const target = c.integration_id ? await integrations.target(c.integration_id, c.user_id) : null;
      if (!target) {
        deleted = true;
        outcome = { kind: "fail", status: null, error: "the webhook integration was deleted before this notification was delivered" };
      } else {
        const headers: Record<string, string> = {
          "content-type": "application/json",
          "user-agent": USER_AGENT,
          [DELIVERY_HEADER]: c.id,
        };
        if (target.secret != null) headers[SIGNATURE_HEADER] = signatureHeader(target.secret, c.payload, now());
        outcome = await attempt({ url: target.url, body: c.payload, headers }, { net: this.deps.net, timeoutMs: schedule.timeoutMs, controller, ca: this.deps.ca });
      }
    } catch (e) {
      log.error("notification attempt crashed", { notification_id: c.id, err: e });
      outcome = { kind: "retry", status: null, error: "internal error during the attempt" };
    } finally {
      this.controllers.delete(controller);
    }
    if (c.integration_id && outcome.kind !== "aborted") {
      if (outcome.kind === "delivered" || deleted) this.failingIds.delete(c.integration_id);
      else this.failingIds.add(c.integration_id);
    }
    const at = now();
    const record = { startedAt, durationMs: performance.now() - t0, statusCode: outcome.kind === "aborted" ? null : outcome.status, error: outcome.kind === "retry" || outcome.kind === "fail" ? outcome.error : null };
    const fields = { notification_id: c.id, user_id: c.user_id, integration_id: c.integration_id, attempt: c.attempt };
    if (outcome.kind === "delivered") {
      this.settled.push({ kind: "delivered", c, at, record });
      if (log.enabled("debug")) log.debug("notification delivered", { ...fields, status: outcome.status });
    } else if (outcome.kind === "aborted") {
      this.settled.push({ kind: "release", c, at });
    } else if (outcome.kind === "retry" && c.attempt < c.max_attempts) {
      const wait = waitAfter(schedule, c.attempt);
      this.settled.push({ kind: "retry", c, at: at + wait, error: outcome.error, record });
      log.info("notification attempt failed; will retry", { ...fields, error: outcome.error, retry_in_ms: wait });
    } else {
      this.settled.push({ kind: "failed", c, at, error: outcome.error, record });
      log.warn("notification failed", { ...fields, error: outcome.error });
    }
  }

  /** Stops claiming, cuts in-flight attempts short (their rows are given back), writes every outcome. */
  async stop() {
    if (!this.running) return;
    this.running = false;
    this.cron?.stop();
    this.cron = null;
    // A pass under way finishes first: the attempts it claims are cut short with the others.
    await this.pass?.catch(() => {});
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Infinity;
    for (const c of this.controllers) c.abort(new Error("server shutting down"));
    await Promise.allSettled([...this.inflight.values()]);
    const settled = this.settled.splice(0);
    try {
      await this.deps.outbox.step(settled, this.deps.now(), 0, this.leaseMs, this.fairness());
    } catch (e) {
      this.deps.log.error("writing notification outcomes at shutdown failed", { err: e, outcomes: settled.length });
    }
  }

  /** Attempts in flight right now. */
  get busy(): number {
    return this.inflight.size;
  }

  /** Integrations failing right now (their latest attempt failed; none delivered since). */
  get failing(): number {
    return this.failingIds.size;
  }
}
