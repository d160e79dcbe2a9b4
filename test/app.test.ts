/**
 * The composition root's lifecycle: a graceful stop lets an in-flight request finish, closes
 * WebSockets with 1001, and leaves a database that reopens cleanly.
 */
import { expect, test } from "bun:test";
import { startMockAnthropic } from "./helpers/mock-anthropic.ts";
import { startTestApp } from "./helpers/app.ts";
import { createProfile } from "./helpers/agent.ts";
import { createUser } from "./helpers/users.ts";
import { WsClient } from "./helpers/ws-client.ts";

test("stop(): in-flight requests finish, WebSockets close with 1001, new connections are refused", async () => {
  const mock = startMockAnthropic();
  const t = await startTestApp({ keepDataDir: true });
  const user = await createUser(t);
  const profileId = await createProfile(t, user, { mock });
  const ws = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${user.token}`] });
  mock.script(() => ({ text: "hi" }));
  // A request that takes a while (it creates a container) is in flight when the stop begins.
  const inflight = fetch(`${t.url}/v1/tasks`, { method: "POST", headers: user.bearer, body: JSON.stringify({ profile_id: profileId, prompt: "x" }) });
  await Bun.sleep(20);
  const stopping = t.app.stop();
  const res = await inflight;
  expect(res.status).toBe(202);
  expect((await ws.waitClose()).code).toBe(1001);
  await stopping;
  expect(await fetch(`${t.url}/healthz`).then(() => "answered", () => "refused")).toBe("refused");

  // The database was checkpointed and closed cleanly: the same data dir serves again.
  const again = await startTestApp({ dataDir: t.dataDir });
  const r = await fetch(`${again.url}/v1/api-tokens`, { headers: user.bearer });
  expect(r.status).toBe(200);
  await again.stop();
  await mock.stop();
});
