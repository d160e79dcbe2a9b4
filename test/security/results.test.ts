/**
 * A bad image path in the final answer never fails a finished task. The result polisher signs
 * workspace image references through Workspaces.signedFileUrl, which refuses a path with a NUL
 * byte (`![x](a%00b)`) or longer than 4096 characters; such a link is left as written, unsigned,
 * while the good ones next to it are still signed. Unit: polishResultText with the app's real
 * signer. End to end: a task against a local Anthropic-speaking server whose final text carries
 * those links completes, with them in its result_text and turn.done.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { polishResultText } from "../../src/agents/polish.ts";
import { createProfile, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { createUser, type TestUser } from "../helpers/users.ts";

const LONG = "d/".repeat(2100) + "x.png"; // 4205 characters: over the workspace's 4096
const BAD: [string, string][] = [
  ["markdown, a NUL byte", "![x](a%00b)"],
  ["markdown, a path over 4,096 characters", `![long](${LONG})`],
  ["<img>, a NUL byte", '<img src="pic%00.png" alt="nul">'],
  ["<img>, a /workspace path over 4,096 characters", `<img src="/workspace/${LONG}">`],
];
const BAD_LINKS = BAD.map(([, link]) => link);

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  user = await createUser(t);
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

describe("polishResultText with the real signer", () => {
  const sign = (rel: string) => t.app.services.workspaces.signedFileUrl("ctr_unit", rel);

  test("the signer itself refuses these paths (what made polishing throw)", () => {
    expect(() => sign("a\0b")).toThrow();
    expect(() => sign(LONG)).toThrow();
  });

  test.each(BAD)("%s: left as written, unsigned, and polishing does not throw", (_label, link) => {
    const text = `Result:\n\n${link}\n\n![ok](chart.png)`;
    const out = polishResultText(text, sign);
    expect(out).toContain(link);
    expect(out).toContain(`![ok](${sign("chart.png")})`);
  });

  test("any throwing signer leaves every link unsigned and the rest of the polishing intact", () => {
    const out = polishResultText("a  \r\n\n\n\n![x](chart.png)\n```\ncode", () => {
      throw new Error("boom");
    });
    expect(out).toBe("a\n\n![x](chart.png)\n```\ncode\n```");
  });
});

describe("end to end", () => {
  test("a task whose final text has a NUL path and paths over 4,096 characters completes with them unsigned", async () => {
    const profileId = await createProfile(t, user, { mock });
    mock.reset();
    const final = ["Here are the charts:", ...BAD_LINKS, "![good](out/chart.png)"].join("\n\n");
    mock.enqueue({ text: final });
    const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "Draw" });
    const task = await waitTask(t, user, task_id);
    expect(task.error).toBeNull();
    expect(task.status).toBe("completed");
    for (const link of BAD_LINKS) expect(task.result_text).toContain(link);
    expect(task.result_text).toMatch(/!\[good\]\(http:\/\/127\.0\.0\.1:\d+\/files\/ctr_[^/]+\/out\/chart\.png\?exp=\d+&sig=[0-9a-f]+\)/);
    const frames = await sessionFrames(t, user, session_id);
    const done = frames.find((f) => f.type === "turn.done" && f.task_id === task_id);
    expect(done.result_text).toBe(task.result_text);
    expect(frames.at(-1)).toMatchObject({ type: "task:done", task_id, status: "completed" });
  }, 60_000);
});
