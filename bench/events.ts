/**
 * Issue 4 benchmark: event appends per second through the event log, against a raw bun:sqlite
 * insert loop in the same run (same table, same pragmas, same frames).
 * - one event per transaction (append + flush each)      goal ≥ 0.8× the raw loop
 * - batched (the log's normal mode: 512 per transaction)  goal ≥ 5× the raw loop
 * - batched, every seq handed out before it is stored (what the hub does for a watched session:
 *   EventLog.reserve writes the seq high-water mark a block ahead)  goal ≥ 5× the raw loop
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../src/db/client.ts";
import { migrate } from "../src/db/migrate.ts";
import { EventLog } from "../src/events/log.ts";
import { median, report } from "./lib/util.ts";

const N = Number(process.env.BENCH_EVENTS ?? 5000);
const ROUNDS = 5;
const dir = mkdtempSync(join(tmpdir(), "runcell-bench-events-"));
const h = openDatabase(join(dir, "runcell.db"));
migrate(h.sqlite);
h.sqlite.run("INSERT INTO users (id, email, name, role, disabled, email_verified, created_at, updated_at) VALUES ('usr_b','b@b.b','b','user',0,0,0,0)");
let sessions = 0;
const newSession = () => {
  const id = `sess_bench_${sessions++}`;
  h.sqlite.run("INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES (?, 'usr_b', 'prof_b', 0, 0)", [id]);
  return id;
};
const frame = (i: number) => ({ type: "task:token" as const, task_id: "task_bench", text: `token ${i} ` });

function raw(): number {
  const sid = newSession();
  const insert = h.sqlite.prepare("INSERT INTO events (session_id, seq, type, task_id, frame, created_at) VALUES (?, ?, ?, ?, ?, ?)");
  const t0 = performance.now();
  for (let i = 1; i <= N; i++) {
    const f = frame(i);
    insert.run(sid, i, f.type, f.task_id, JSON.stringify({ ...f, session_id: sid, seq: i }), Date.now());
  }
  return N / ((performance.now() - t0) / 1000);
}

function viaLog(batched: boolean, handedOut = false): number {
  const sid = newSession();
  const log = new EventLog(h.sqlite, Date.now);
  const t0 = performance.now();
  for (let i = 1; i <= N; i++) {
    const r = log.append(sid, frame(i));
    if (handedOut) log.reserve(sid, r.seq);
    if (!batched) log.flush();
  }
  log.flush();
  return N / ((performance.now() - t0) / 1000);
}

const results: Record<string, number[]> = { raw: [], single: [], batched: [], handedOut: [] };
for (let r = 0; r < ROUNDS; r++) {
  results.raw!.push(raw());
  results.single!.push(viaLog(false));
  results.batched!.push(viaLog(true));
  results.handedOut!.push(viaLog(true, true));
}
console.log(`# event log benchmark (${N} appends × ${ROUNDS} rounds, WAL + synchronous=NORMAL) — ${new Date().toISOString()}`);
report("event appends, one per transaction", median(results.single!), median(results.raw!), "ev/s", "≥0.8×", "higher");
report("event appends, batched (log default)", median(results.batched!), median(results.raw!), "ev/s", "≥5×", "higher");
report("event appends, batched, seq handed out", median(results.handedOut!), median(results.raw!), "ev/s", "≥5×", "higher");
h.close();
rmSync(dir, { recursive: true, force: true });
