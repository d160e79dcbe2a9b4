/** The chat's transcript model (web/src/views/chat/model.ts) folding frames, as plain code: rewinding on a reconnect. */
import { expect, test } from "bun:test";
import type { ServerFrame } from "../../web/src/lib/stream.ts";
import { Transcript } from "../../web/src/views/chat/model.ts";

const S = "sess_1";
let seq = 0;
const frame = (f: Record<string, unknown>) => ({ session_id: S, seq: ++seq, ...f }) as unknown as ServerFrame;
const token = (task_id: string, text: string) => frame({ type: "task:token", task_id, text });
const textOf = (m: Transcript, id: string) => m.turns.find((t) => t.taskId === id)!.parts.map((p) => (p.kind === "text" ? p.text : `[${p.kind}]`)).join("");

test("a reconnect rewinds to before the unfinished turn, which the replay rebuilds; finished turns before it stay", () => {
  seq = 0;
  const m = new Transcript(S);
  m.claim("task_b", "Second");
  for (const f of [
    frame({ type: "session.ready", container_id: "c" }),
    token("task_a", "Done answer"),
    frame({ type: "turn.done", task_id: "task_a", result_text: "Done answer", input_tokens: 1, output_tokens: 1, cost_usd: 0 }),
    frame({ type: "task:done", task_id: "task_a", status: "completed" }),
    token("task_b", "Cut "),
    token("task_b", "off"),
  ])
    m.apply(f);
  expect(m.rewind()).toBe(4);
  // Shown as it was until the replay starts; then emptied and rebuilt from the replay.
  expect(textOf(m, "task_b")).toBe("Cut off");
  m.apply(frame({ type: "session.replay_start" }));
  expect(textOf(m, "task_b")).toBe("");
  m.apply(token("task_b", "Whole"));
  m.apply(frame({ type: "session.replay_end", last_seq: seq }));
  expect(textOf(m, "task_b")).toBe("Whole");
  expect(textOf(m, "task_a")).toBe("Done answer");
  expect(m.turns.find((t) => t.taskId === "task_b")!.prompt).toBe("Second");
  expect(m.lastSeq).toBe(seq);
});

test("a finished turn with frames after the unfinished one began is rebuilt whole too", () => {
  seq = 0;
  const m = new Transcript(S);
  for (const f of [
    token("task_a", "A1 "),
    token("task_b", "B1 "),
    token("task_a", "A2"),
    frame({ type: "task:done", task_id: "task_a", status: "completed" }),
    token("task_b", "B2"),
  ])
    m.apply(f);
  // task_b began after seq 1, but task_a (begun before) has frames after that: both from the start.
  expect(m.rewind()).toBe(0);
  m.apply(frame({ type: "session.replay_start" }));
  for (const f of [token("task_a", "A1 "), token("task_b", "B1 "), token("task_a", "A2"), frame({ type: "task:done", task_id: "task_a", status: "completed" }), token("task_b", "B2")]) m.apply(f);
  m.apply(frame({ type: "session.replay_end", last_seq: seq }));
  expect(textOf(m, "task_a")).toBe("A1 A2");
  expect(textOf(m, "task_b")).toBe("B1 B2");
});

test("with no unfinished turn a reconnect resumes after the last seq and drops nothing", () => {
  seq = 0;
  const m = new Transcript(S);
  m.apply(token("task_a", "All"));
  m.apply(frame({ type: "task:done", task_id: "task_a", status: "completed" }));
  expect(m.rewind()).toBe(2);
  m.apply(frame({ type: "session.replay_start" }));
  expect(textOf(m, "task_a")).toBe("All");
});
