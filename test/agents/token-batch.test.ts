import { describe, expect, test } from "bun:test";
import { makeScrubber, SCRUBBED } from "../../src/agents/scrub.ts";
import { TokenBatch } from "../../src/agents/token-batch.ts";

const tick = () => new Promise<void>((r) => setImmediate(r));

function batch(secrets: string[] = [], max?: number) {
  const sent: string[] = [];
  const b = new TokenBatch(makeScrubber(secrets).stream(), (t) => sent.push(t), max);
  return { b, sent };
}

describe("TokenBatch", () => {
  test("deltas pushed in one synchronous run (one read's events) leave as one frame once it is over", async () => {
    const { b, sent } = batch();
    for (const d of ["Hel", "lo", ", ", "world"]) b.push(d);
    expect(sent).toEqual([]);
    await Promise.resolve();
    expect(sent).toEqual(["Hello, world"]);
  });

  test("deltas of separate runs leave separately, nothing waits for a timer or the end of the turn", async () => {
    const { b, sent } = batch();
    b.push("one ");
    await Promise.resolve();
    b.push("two");
    await Promise.resolve();
    expect(sent).toEqual(["one ", "two"]);
    await tick();
    expect(sent).toEqual(["one ", "two"]);
  });

  test("a flush by hand sends what is pending; the scheduled send then has nothing to add", async () => {
    const { b, sent } = batch();
    b.push("a");
    b.push("b");
    b.flush();
    expect(sent).toEqual(["ab"]);
    await tick();
    expect(sent).toEqual(["ab"]);
  });

  test("a batch reaching the maximum is sent at once", async () => {
    const { b, sent } = batch([], 10);
    b.push("12345");
    b.push("67890");
    expect(sent).toEqual(["1234567890"]);
    b.push("x");
    await tick();
    expect(sent).toEqual(["1234567890", "x"]);
  });

  test("a secret split across deltas is replaced; its held-back beginning leaves only when clear", async () => {
    const { b, sent } = batch(["s3cr3t-value"]);
    b.push("key is s3c");
    await tick();
    expect(sent).toEqual(["key is "]);
    b.push("r3t-val");
    await tick();
    b.push("ue, done");
    b.end();
    expect(sent.join("")).toBe(`key is ${SCRUBBED}, done`);
    expect(sent.join("")).not.toContain("s3c");
  });

  test("flush sends pending text and cancels the scheduled send; end adds the held-back tail", async () => {
    const { b, sent } = batch(["abcdef"]);
    b.push("text ab");
    b.flush();
    expect(sent).toEqual(["text "]);
    await tick();
    expect(sent).toEqual(["text "]);
    b.end();
    expect(sent).toEqual(["text ", "ab"]);
    await tick();
    expect(sent).toEqual(["text ", "ab"]);
  });

  test("empty deltas schedule nothing", async () => {
    const { b, sent } = batch();
    b.push("");
    await tick();
    b.end();
    expect(sent).toEqual([]);
  });
});
