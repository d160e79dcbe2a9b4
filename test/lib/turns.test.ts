import { expect, test } from "bun:test";
import { nextTurn, turnsWaiting } from "../../src/lib/turns.ts";

const busy = (ms: number) => {
  const t = performance.now();
  while (performance.now() - t < ms) {}
};

test("waiters are let go one per turn, in order", async () => {
  const order: string[] = [];
  const all = [1, 2, 3].map(async (i) => {
    await nextTurn();
    order.push(`w${i}`);
    // Something queued by this waiter's turn runs before the next waiter.
    queueMicrotask(() => order.push(`m${i}`));
  });
  expect(turnsWaiting()).toBe(3);
  await Promise.all(all);
  expect(order).toEqual(["w1", "m1", "w2", "m2", "w3", "m3"]);
  expect(turnsWaiting()).toBe(0);
});

test("the event loop reads its sockets between two waiters (not after all of them)", async () => {
  const seen: string[] = [];
  let gotData!: () => void;
  const arrived = new Promise<void>((r) => (gotData = r));
  const server = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data() {
        seen.push("data");
        gotData();
      },
    },
  });
  const client = await Bun.connect({ hostname: "127.0.0.1", port: server.port, socket: { data() {} } });
  try {
    const steps = Array.from({ length: 5 }, async (_, i) => {
      await nextTurn();
      if (i === 0) client.write("x"); // arrives while the other waiters are still queued
      busy(20);
      seen.push(`step${i}`);
    });
    await Promise.all([...steps, arrived]);
    const at = seen.indexOf("data");
    expect(at).toBeGreaterThan(0);
    expect(at).toBeLessThan(seen.length - 1);
  } finally {
    client.end();
    server.stop(true);
  }
});
