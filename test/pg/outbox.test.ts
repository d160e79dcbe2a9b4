/**
 * The webhook outbox shared by two servers on one PostgreSQL database: each claims due deliveries
 * with `FOR UPDATE SKIP LOCKED` (src/notifications/outbox.ts), so 100 notifications queued through
 * both are each delivered exactly once, and the work splits between them. Server A is a test app
 * (its own pool and delivery worker); server B is a second pool on the same database with its own
 * Notifications service and worker — the outbox as a second replica would run it.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { openPostgres, type PostgresHandle } from "../../src/db/pg/client.ts";
import { silentLogger } from "../../src/log.ts";
import { Notifications } from "../../src/notifications/service.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { waitFor } from "../helpers/net.ts";
import { PG_SERVER } from "../helpers/pg.ts";
import { api, createUser } from "../helpers/users.ts";
import { type Receiver, startReceiver } from "../notifications/receiver.ts";

const N = 100;

describe.skipIf(!PG_SERVER)("the webhook outbox shared by two servers on one PostgreSQL database", () => {
  let t: TestApp | undefined;
  let b: PostgresHandle | undefined;
  let bNotifications: Notifications | undefined;
  let rcv: Receiver | undefined;
  afterAll(async () => {
    await bNotifications?.worker.stop();
    await b?.close();
    rcv?.stop();
    await t?.stop();
  });

  test(`${N} notifications, two delivery workers: each delivered exactly once, split between them`, async () => {
    t = await startTestApp();
    const secret = "whsec_" + crypto.randomUUID();
    // A slow receiver (30 ms an answer): neither worker can take everything while the other waits.
    rcv = startReceiver({ secret, respond: async () => (await Bun.sleep(30), new Response("ok")) });
    const u = await createUser(t);
    expect((await api(t, "POST", "/v1/integrations", u.bearer, { type: "webhook", config: { url: rcv.url + "/hook", secret } })).status).toBe(201);

    b = await openPostgres(t.config.databaseUrl!);
    bNotifications = new Notifications({ db: b.db, sqlite: null, sealer: t.app.services.sealer, log: silentLogger, now: Date.now, config: t.config });
    const delivered = { a: 0, b: 0 };
    t.app.services.notifications.worker.onOutcome = (kind) => void (kind === "delivered" && delivered.a++);
    bNotifications.worker.onOutcome = (kind) => void (kind === "delivered" && delivered.b++);
    await bNotifications.worker.start();

    // Half queued through each server (each wakes its own worker at once).
    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const via = i % 2 ? t!.app.services.notifications : bNotifications!;
        const q = await via.enqueue({ userId: u.id, source: "agent", message: `n${i}` });
        ids.push(q!.id);
      }),
    );
    await waitFor(() => rcv!.received.length >= N && delivered.a + delivered.b >= N, { timeoutMs: 30_000, what: `${N} deliveries` });
    await Bun.sleep(300); // a duplicate would arrive now

    // Each notification's message is unique (n0…n99): the receiver saw every one exactly once.
    const seen = rcv.received.map((r) => (JSON.parse(r.body) as { message: string }).message);
    expect(seen.length).toBe(N);
    expect(new Set(seen)).toEqual(new Set(Array.from({ length: N }, (_, i) => `n${i}`)));
    expect(rcv.received.every((r) => r.hmacOk)).toBe(true);
    expect(delivered.a + delivered.b).toBe(N);
    expect(delivered.a).toBeGreaterThan(0);
    expect(delivered.b).toBeGreaterThan(0);
    for (const id of ids) expect((await t.app.services.notifications.get(u.id, id)).status).toBe("delivered");
  });
});
