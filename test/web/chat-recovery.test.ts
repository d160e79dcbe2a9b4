/**
 * The chat when things go wrong, in real Chromium against a real app:
 *
 * - the rate limit: a session page loaded with the caller's bucket empty (the default limit,
 *   60/min, burst 10) says it is slowed down, retries, and loads — never "No sessions yet." nor a
 *   Cancel button for a finished turn; a session.resume refused with RATE_LIMITED is sent again
 *   after retry_after; a page load fetches the session list once;
 * - refusals: a first message whose workspace cannot start opens its session and shows
 *   CONTAINER_FAILED; a first message refused (too long, a deleted profile) shows why and stays in
 *   the composer; in a session, a refused message stays in the composer and the next one is shown
 *   as itself (not under the refused text);
 * - a session that does not exist says so (no endless loading, no composer);
 * - a long session opens scrolled to its newest turn and follows new turns while at the bottom,
 *   also at 390 px wide, where the page scrolls instead of the transcript;
 * - after a server restart mid-stream (the cut-off text removed from the log, the answer streamed
 *   again), an open page shows the answer once: it resumes from before the unfinished turn;
 * - a cancelled turn's tokens and cost show under it and in the session's figures (the session
 *   record's, as GET /v1/sessions/:id has them);
 * - a relative image in streamed text is its alt text (never fetched) until the result's URL;
 * - signed out in another tab: the sign-in form with a notice, and after signing in the unsent
 *   message is still in the composer; a page that loads after that never shows an empty table;
 * - the profile picker shows a profile made elsewhere when it gets the focus.
 *
 * Any console error, page error or CSP violation fails the test (expected ones aside).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createProfile } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { type Browser, composer, expectClean, EXPECTED_4XX, lastTurn, launchBrowser, openPage, type Page, pagePool, PHONE, send, type WatchedPage } from "../helpers/browser.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let mock: MockProviderServer;
let browser: Browser;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await mock?.stop();
  await t?.stop();
});

const pages = pagePool(() => browser);
const page = (app: TestApp, user: TestUser | null, opts: Parameters<typeof openPage>[1] = {}): Promise<WatchedPage> => pages.open({ url: app.url, cookie: user?.cookie, ...opts });
const closePages = () => pages.closeAll();


/**
 * A finished session written through the app's services (as the agent loop writes one): `turns`
 * turns, each a prompt, some text, its usage and its end. Returns the session and the last answer.
 */
async function seedSession(app: TestApp, user: TestUser, profileId: string, turns: number) {
  const s = app.app.services;
  const session = await s.agentSessions.create(user.id, profileId, "Question 1");
  const publish = (f: Parameters<typeof s.hub.publish>[1]) => s.hub.publish(session.id, f);
  publish({ type: "session.ready", container_id: "ctr_00000000000000000000000000", container_name: "runcell-seeded", profile_id: profileId });
  let answer = "";
  for (let turn = 1; turn <= turns; turn++) {
    const task = await s.tasks.create({ userId: user.id, sessionId: session.id, profileId, prompt: `Question ${turn}`, maxTurns: 10, maxBudgetUsd: 5 });
    answer = `Answer ${turn}: ${"all good here. ".repeat(20)}`.trim();
    publish({ type: "task:token", task_id: task.id, text: answer });
    publish({ type: "turn.done", task_id: task.id, result_text: answer, input_tokens: 100, output_tokens: 10, cost_usd: 0.001 });
    publish({ type: "task:done", task_id: task.id, status: "completed" });
    await s.tasks.update(task.id, { status: "completed", result_text: answer, input_tokens: 100, output_tokens: 10, cost_usd: 0.001, turns: 1, started_at: Date.now(), finished_at: Date.now() });
    await s.agentSessions.addUsage(session.id, 100, 10, 0.001);
  }
  s.eventLog.flush();
  return { sessionId: session.id, answer, publish };
}

/** Records, from the document's start, whether a text ever showed in the page (window.__seen[text]). */
const watchFor = (texts: string[]) => `{
  const texts = ${JSON.stringify(texts)};
  window.__seen = {};
  const check = () => { for (const t of texts) if (document.body?.textContent?.includes(t)) window.__seen[t] = true; };
  document.addEventListener("DOMContentLoaded", () => new MutationObserver(check).observe(document.body, { childList: true, subtree: true, characterData: true }));
}`;
const seen = (p: Page) => p.evaluate(() => (window as unknown as { __seen: Record<string, boolean> }).__seen);

/** Waits (up to 5 s) for the session's figures to read `text`, then checks they do. */
async function expectTotals(p: Page, text: string) {
  await p.waitForFunction((want) => document.querySelector('[aria-label="Session totals"]')?.textContent === want, text, { timeout: 5000 }).catch(() => undefined);
  expect(await p.getByLabel("Session totals").textContent()).toBe(text);
}

// -------------------------------------------------------------------------------------------------

describe("the rate limit", () => {
  test("a session page loaded with the caller's bucket empty (default limit) says it is slowed down, retries, and loads", async () => {
    const slow = await startTestApp({ flags: ["--rate-limit-per-minute", "60", "--rate-limit-burst", "10"] });
    try {
      const user = await createUser(slow);
      const profileId = await createProfile(slow, user, { mock });
      const { sessionId, answer } = await seedSession(slow, user, profileId, 2);
      const { context, page: p, problems } = await page(slow, user, {
        allow: [/status of 429/, /WebSocket connection to .* failed/, /Unexpected response code: 429/],
      });
      await context.addInitScript(watchFor(["No sessions yet.", "Retrying in"]));
      const refusals: string[] = [];
      p.on("response", (r) => void (r.status() === 429 && refusals.push(new URL(r.url()).pathname)));
      p.on("websocket", (ws) => ws.on("framereceived", (f) => void (String(f.payload).includes('"RATE_LIMITED"') && refusals.push("frame"))));
      // The same user's bucket, emptied with their API token (every request of theirs shares it).
      while ((await api(slow, "GET", "/v1/me", user.bearer)).status !== 429);

      await p.goto(`${slow.url}/sessions/${sessionId}`);
      await lastTurn(p).getByText(answer).waitFor({ timeout: 45_000 });
      await p.getByRole("navigation", { name: "Sessions" }).getByRole("link", { name: /^Question 1/ }).waitFor({ timeout: 20_000 });
      expect(refusals.length).toBeGreaterThan(0);
      const shown = await seen(p);
      expect(shown["Retrying in"]).toBe(true);
      expect(shown["No sessions yet."]).toBeUndefined();
      expect(await p.getByRole("button", { name: "Cancel" }).count()).toBe(0);
      expect(await p.getByRole("article").count()).toBe(2);
      expectClean(problems);
      await closePages();
    } finally {
      await slow.stop();
    }
  }, 90_000);

  test("a session.resume refused with RATE_LIMITED is sent again after retry_after; the page says so meanwhile", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { sessionId, answer } = await seedSession(t, user, profileId, 1);
    const { context, page: p, problems } = await page(t, user);
    const resumes: string[] = [];
    // The stream, passed through, except that the first session.resume is answered as an empty bucket would.
    await context.routeWebSocket(/\/v1\/stream/, (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((m) => {
        const msg = JSON.parse(String(m));
        if (msg.type === "session.resume" && resumes.push(msg.request_id) === 1) {
          ws.send(JSON.stringify({ type: "error", code: "RATE_LIMITED", message: "Too many requests", request_id: msg.request_id, details: { retry_after: 2 } }));
        } else server.send(m);
      });
    });
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await p.getByRole("status").filter({ hasText: /Retrying in \d s/ }).waitFor();
    await p.getByText("Loading the session…").waitFor();
    // Not drawn yet: no turn, no Cancel for it.
    expect(await p.getByRole("button", { name: "Cancel" }).count()).toBe(0);
    await lastTurn(p).getByText(answer).waitFor({ timeout: 10_000 });
    expect(resumes.length).toBe(2);
    expect(resumes[0]).not.toBe(resumes[1]);
    expect(await p.getByRole("button", { name: "Cancel" }).count()).toBe(0);
    await p.getByRole("status").filter({ hasText: /Retrying in/ }).waitFor({ state: "detached" });
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("a session page load asks for the session list once", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { sessionId, answer } = await seedSession(t, user, profileId, 1);
    const { page: p, problems } = await page(t, user);
    const requests: string[] = [];
    p.on("request", (r) => {
      const path = new URL(r.url()).pathname;
      if (/^\/(v1|api)\//.test(path)) requests.push(path);
    });
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await lastTurn(p).getByText(answer).waitFor();
    await p.getByRole("navigation", { name: "Sessions" }).getByRole("link", { name: /^Question 1/ }).waitFor();
    await Bun.sleep(300);
    expect(requests.filter((r) => r === "/v1/sessions")).toEqual(["/v1/sessions"]);
    // Each once: who is signed in, the profiles, the sessions, the session's tasks, the session's
    // record (its figures, after the replay) (then the stream's upgrade and session.resume).
    expect(requests.sort()).toEqual(["/api/auth/get-session", "/v1/profiles", "/v1/sessions", `/v1/sessions/${sessionId}`, "/v1/tasks"]);
    expectClean(problems);
    await closePages();
  });
});

// -------------------------------------------------------------------------------------------------

describe("refused and failed messages", () => {
  test("a first message whose workspace cannot start opens its session and shows CONTAINER_FAILED", async () => {
    const user = await createUser(t);
    await createProfile(t, user, { mock, image: "runcell-test/does-not-exist:latest" });
    const { page: p, problems } = await page(t, user);
    await p.goto(t.url);
    await send(p, "Start in a broken image");
    await p.waitForURL(/\/sessions\/sess_[a-z0-9]+$/, { timeout: 30_000 });
    const turn = lastTurn(p);
    await turn.getByText("Start in a broken image").waitFor({ timeout: 30_000 });
    const alert = turn.getByRole("alert");
    await alert.waitFor({ timeout: 30_000 });
    expect(await alert.textContent()).toMatch(/^CONTAINER_FAILED: .*does-not-exist/);
    expect(await p.getByRole("button", { name: "Cancel" }).count()).toBe(0);
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("a first message refused by the server (too long; a deleted profile) shows why and stays in the composer", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { page: p, problems } = await page(t, user);
    await p.goto(t.url);
    await p.getByRole("heading", { name: "New session" }).waitFor();
    const long = "x".repeat(100_001);
    await send(p, long);
    await p.getByRole("alert").filter({ hasText: "VALIDATION_FAILED" }).waitFor();
    expect(await composer(p).inputValue()).toBe(long);
    expect(new URL(p.url()).pathname).toBe("/");

    expect((await api(t, "DELETE", `/v1/profiles/${profileId}`, user.bearer)).status).toBe(204);
    await send(p, "To a profile that is gone");
    await p.getByRole("alert").filter({ hasText: "NOT_FOUND" }).waitFor();
    expect(await composer(p).inputValue()).toBe("To a profile that is gone");
    expect(new URL(p.url()).pathname).toBe("/");
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("an error telling an API user to PUT /v1/secrets/NAME links to the Secrets page instead", async () => {
    const user = await createUser(t);
    expect((await api(t, "PUT", "/v1/secrets/DEPLOY_TOKEN", user.bearer, { value: "v-value" })).status).toBe(204);
    await createProfile(t, user, { mock, env: { DEPLOY_TOKEN: { secret: "DEPLOY_TOKEN" } } });
    expect((await api(t, "DELETE", "/v1/secrets/DEPLOY_TOKEN", user.bearer)).status).toBe(204);
    const { page: p, problems } = await page(t, user);
    await p.goto(t.url);
    await send(p, "Use the token");
    const alert = p.getByRole("alert").filter({ hasText: "DEPLOY_TOKEN" });
    await alert.waitFor({ timeout: 30_000 });
    expect(await alert.textContent()).not.toContain("PUT /v1/secrets");
    await alert.getByRole("link", { name: "Secrets page" }).click();
    await p.getByRole("heading", { name: "Secrets" }).waitFor();
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("in a session, a refused message stays in the composer; the next one is shown as itself", async () => {
    const user = await createUser(t);
    await createProfile(t, user, { mock });
    // (The refusal is the 400 of POST /v1/tasks.)
    const { page: p, problems } = await page(t, user, { allow: [EXPECTED_4XX] });
    mock.reset();
    mock.enqueue({ text: "First answer." }, { text: "Second answer." });
    await p.goto(t.url);
    await send(p, "Hello");
    await p.waitForURL(/\/sessions\//);
    await lastTurn(p).getByText("First answer.").waitFor({ timeout: 30_000 });

    const long = `${"y".repeat(100_001)}`;
    await send(p, long);
    await p.getByRole("alert").filter({ hasText: "VALIDATION_FAILED" }).waitFor();
    expect(await composer(p).inputValue()).toBe(long);

    await send(p, "A short one");
    const turn = lastTurn(p);
    await turn.getByText("Second answer.").waitFor({ timeout: 30_000 });
    expect(await turn.locator(".msg.user").textContent()).toBe("A short one");
    expect(await p.getByRole("article").count()).toBe(2);
    expect(await p.locator(".transcript").textContent()).not.toContain("yyyy");
    expect(await composer(p).inputValue()).toBe("");
    expectClean(problems);
    await closePages();
  }, 60_000);
});

// -------------------------------------------------------------------------------------------------

describe("opening sessions", () => {
  test("a session that does not exist says so: no endless loading, no composer", async () => {
    const user = await createUser(t);
    const { page: p, problems } = await page(t, user, { allow: [EXPECTED_4XX] });
    await p.goto(`${t.url}/sessions/sess_doesnotexist`);
    await p.getByRole("heading", { name: "Session not found" }).waitFor();
    expect(await p.getByText("Loading the session…").count()).toBe(0);
    expect(await composer(p).count()).toBe(0);
    await p.getByRole("link", { name: "Start a new session" }).click();
    await p.getByRole("heading", { name: "New session" }).waitFor();
    expectClean(problems);
    await closePages();
  });

  test("a long session opens at its newest turn and follows new ones while at the bottom", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { sessionId, answer, publish } = await seedSession(t, user, profileId, 30);
    const { page: p, problems } = await page(t, user);
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await lastTurn(p).getByText(answer).waitFor();
    const gap = () => p.locator(".transcript").evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight);
    const scrollable = await p.locator(".transcript").evaluate((el) => el.scrollHeight > el.clientHeight * 2);
    expect(scrollable).toBe(true);
    await p.waitForFunction(() => {
      const el = document.querySelector(".transcript")!;
      return el.scrollHeight - el.scrollTop - el.clientHeight < 2;
    }, null, { timeout: 5000 }).catch(() => undefined);
    expect(await gap()).toBeLessThan(2);
    expect(await lastTurn(p).getByText(answer).isVisible()).toBe(true);

    // A new turn streams in: the view follows it.
    const s = t.app.services;
    const task = await s.tasks.create({ userId: user.id, sessionId, profileId, prompt: "Live question", maxTurns: 10, maxBudgetUsd: 5 });
    publish({ type: "task:token", task_id: task.id, text: `Live answer ${"streams on. ".repeat(60)}` });
    await lastTurn(p).getByText(/^Live answer/).waitFor();
    await Bun.sleep(200);
    expect(await gap()).toBeLessThan(2);

    // Scrolled up by the user, it stays where they are.
    await p.locator(".transcript").evaluate((el) => (el.scrollTop = 0));
    await Bun.sleep(100);
    publish({ type: "task:token", task_id: task.id, text: " More text." });
    await lastTurn(p).getByText(/More text\./).waitFor();
    await Bun.sleep(200);
    expect(await p.locator(".transcript").evaluate((el) => el.scrollTop)).toBe(0);
    publish({ type: "task:done", task_id: task.id, status: "cancelled" });
    expectClean(problems);
    await closePages();
  });
  test("at 390 px wide (the page scrolls, not the transcript) a long session opens at its newest turn, follows streamed text at the bottom, and stays put when scrolled up", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { sessionId, answer, publish } = await seedSession(t, user, profileId, 30);
    const { page: p, problems } = await page(t, user, { context: { viewport: PHONE } });
    // The session list (above the transcript at this width) arrives after the transcript is drawn.
    await p.route((u) => u.pathname === "/v1/sessions", async (r) => {
      await Bun.sleep(800);
      await r.continue();
    });
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await lastTurn(p).getByText(answer).waitFor();
    await p.getByRole("navigation", { name: "Sessions" }).getByRole("link", { name: /^Question 1/ }).waitFor();
    await Bun.sleep(200);
    // How far the bottom of the newest turn is below what is on screen (whatever scrolls: the
    // transcript or the page); 0 or less when it is in view. And the page scrolled to the top.
    const below = () =>
      lastTurn(p).evaluate((el) => {
        const t = document.querySelector(".transcript")!.getBoundingClientRect();
        return el.getBoundingClientRect().bottom - Math.min(innerHeight, t.bottom);
      });
    const top = () => p.evaluate(() => ({ page: scrollY, transcript: document.querySelector(".transcript")!.scrollTop }));
    expect(await p.evaluate(() => document.documentElement.scrollHeight > innerHeight * 2)).toBe(true);
    await p.waitForFunction(() => window.scrollY > 0, null, { timeout: 5000 }).catch(() => undefined);
    expect(await below()).toBeLessThan(2);
    // At the very bottom: the composer is on screen.
    expect(await p.evaluate(() => document.documentElement.scrollHeight - scrollY - innerHeight)).toBeLessThan(2);

    // A new turn streams in: the view follows it.
    const s = t.app.services;
    const task = await s.tasks.create({ userId: user.id, sessionId, profileId, prompt: "Live question", maxTurns: 10, maxBudgetUsd: 5 });
    publish({ type: "task:token", task_id: task.id, text: `Live answer ${"streams on. ".repeat(60)}` });
    await lastTurn(p).getByText(/^Live answer/).waitFor();
    await Bun.sleep(200);
    expect(await below()).toBeLessThan(2);
    publish({ type: "task:token", task_id: task.id, text: ` ${"and on. ".repeat(80)}` });
    await lastTurn(p).getByText(/and on\.\s*$/).waitFor();
    await Bun.sleep(200);
    expect(await below()).toBeLessThan(2);

    // Scrolled up by the user, it stays where they are.
    await p.mouse.move(195, 400);
    await p.mouse.wheel(0, -3000);
    await p.waitForFunction(() => scrollY < document.documentElement.scrollHeight - innerHeight - 1000, null, { timeout: 5000 });
    await Bun.sleep(150);
    const before = await top();
    publish({ type: "task:token", task_id: task.id, text: " More text." });
    await lastTurn(p).getByText(/More text\./).waitFor();
    await Bun.sleep(200);
    expect(await top()).toEqual(before);
    expect(await below()).toBeGreaterThan(500);
    publish({ type: "task:done", task_id: task.id, status: "cancelled" });
    expectClean(problems);
    await closePages();
  });
});

// -------------------------------------------------------------------------------------------------

describe("a server restart mid-stream", () => {
  test("the answer streamed again after the restart replaces the cut-off text the page had: shown once, then followed live", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { sessionId, answer, publish } = await seedSession(t, user, profileId, 2);
    const { context, page: p, problems, allow } = await page(t, user);
    // The page's sockets, to drop them; and what the page sends on them.
    await context.addInitScript(`{ const Native = WebSocket; window.__sockets = [];
      window.WebSocket = class extends Native { constructor(...a) { super(...a); window.__sockets.push(this); } }; }`);
    const sent: { type: string; after?: number }[] = [];
    p.on("websocket", (ws) => ws.on("framesent", (f) => sent.push(JSON.parse(String(f.payload)))));
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await p.getByText(answer).waitFor();

    // A turn streams; the page shows the start of its answer.
    const s = t.app.services;
    const task = await s.tasks.create({ userId: user.id, sessionId, profileId, prompt: "Live question", maxTurns: 10, maxBudgetUsd: 5 });
    const beforeTurn = (await s.eventLog.bound(sessionId)).seq;
    for (const piece of ["Cut ", "off ", "answer "]) publish({ type: "task:token", task_id: task.id, text: piece });
    const text = () => lastTurn(p).locator(".md").last().evaluate((el) => el.textContent!.replace(/\s+/g, " ").trim());
    await lastTurn(p).getByText("Cut off answer").waitFor();

    // The server stops: the page loses its socket. Started again, the server removes the cut-off
    // text from the log and makes the model request again: the answer streams from its start.
    allow.push(/WebSocket connection to .* failed/, /ERR_INTERNET_DISCONNECTED/);
    await context.setOffline(true);
    await p.evaluate(() => (window as unknown as { __sockets: WebSocket[] }).__sockets.at(-1)!.close());
    s.eventLog.flush();
    expect(await s.eventLog.dropCutText(sessionId, task.id)).toBe(3);
    for (const piece of ["Whole ", "new ", "answer "]) publish({ type: "task:token", task_id: task.id, text: piece });
    await context.setOffline(false);
    await lastTurn(p).getByText("Whole new answer").waitFor({ timeout: 15_000 });
    await Bun.sleep(300);
    expect(await text()).toBe("Whole new answer");
    // The earlier turns are as they were (not doubled), and the live stream goes on once.
    expect(await p.getByRole("article").count()).toBe(3);
    expect(await p.getByText(answer).count()).toBe(1);
    publish({ type: "task:token", task_id: task.id, text: "goes on." });
    await lastTurn(p).getByText(/goes on\./).waitFor();
    expect(await text()).toBe("Whole new answer goes on.");
    // Resumed from before the turn began, not after the last seq it had seen.
    const resumes = sent.filter((m) => m.type === "session.resume");
    expect(resumes.length).toBe(2);
    expect(resumes[1]!.after).toBe(beforeTurn);
    publish({ type: "task:done", task_id: task.id, status: "cancelled" });
    allow.length = 0;
    expectClean(problems);
    await closePages();
  });
});

// -------------------------------------------------------------------------------------------------

describe("figures", () => {
  test("a cancelled turn's tokens and cost show under it and in the session's figures, as the API has them, live and after a reload", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { sessionId, publish } = await seedSession(t, user, profileId, 1);
    const { page: p, problems } = await page(t, user);
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await expectTotals(p, "100 tokens in · 10 out · $0.0010");

    // A turn streams and is cancelled: the model was paid for (as the agent loop charges each call).
    const s = t.app.services;
    const task = await s.tasks.create({ userId: user.id, sessionId, profileId, prompt: "Stop me", maxTurns: 10, maxBudgetUsd: 5 });
    publish({ type: "task:token", task_id: task.id, text: "Working on it" });
    await lastTurn(p).getByText("Working on it").waitFor();
    await s.tasks.addUsage(task.id, 2000, 500, 0.0135);
    await s.agentSessions.addUsage(sessionId, 2000, 500, 0.0135);
    await s.tasks.update(task.id, { status: "cancelled", finished_at: Date.now() });
    publish({ type: "task:done", task_id: task.id, status: "cancelled" });
    const api_ = (await api(t, "GET", `/v1/sessions/${sessionId}`, user.bearer)).body;
    expect([api_.input_tokens, api_.output_tokens, api_.cost_usd]).toEqual([2100, 510, 0.0145]);
    for (const reload of [false, true]) {
      if (reload) await p.reload();
      await expectTotals(p, "2,100 tokens in · 510 out · $0.01");
      await lastTurn(p).locator("footer").getByText("2,000 in · 500 out · $0.01").waitFor({ timeout: 5000 });
      await lastTurn(p).getByText("cancelled").waitFor();
    }
    expectClean(problems);
    await closePages();
  });
});

describe("a cancelled turn", () => {
  test("keeps what it showed, in order: its turn.done (result_text: what it had streamed) does not move its text after its tool calls", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { sessionId, answer, publish } = await seedSession(t, user, profileId, 1);
    const { page: p, problems } = await page(t, user);
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await p.getByText(answer).waitFor();

    const s = t.app.services;
    const task = await s.tasks.create({ userId: user.id, sessionId, profileId, prompt: "Look around", maxTurns: 10, maxBudgetUsd: 5 });
    publish({ type: "task:token", task_id: task.id, text: "Let me look first." });
    publish({ type: "task:tool_use", task_id: task.id, tool: "Bash", tool_use_id: "toolu_c1", input: { command: "ls /workspace/listing-here" } });
    await lastTurn(p).getByText("Let me look first.").waitFor();
    publish({ type: "task:tool_result", task_id: task.id, tool: "Bash", tool_use_id: "toolu_c1", output: "[cancelled by the user]", is_error: true });
    await s.tasks.update(task.id, { status: "cancelled", finished_at: Date.now(), result_text: "Let me look first." });
    publish({ type: "turn.done", task_id: task.id, result_text: "Let me look first.", input_tokens: 0, output_tokens: 0, cost_usd: 0 });
    publish({ type: "task:done", task_id: task.id, status: "cancelled" });
    for (const reload of [false, true]) {
      if (reload) await p.reload();
      await lastTurn(p).locator("footer").getByText(/cancelled/).waitFor();
      const text = await lastTurn(p).evaluate((el) => el.textContent!);
      expect(text.split("Let me look first.").length - 1).toBe(1);
      expect(text.indexOf("Let me look first.")).toBeLessThan(text.indexOf("listing-here"));
    }
    expectClean(problems);
    await closePages();
  });
});

// -------------------------------------------------------------------------------------------------

describe("images", () => {
  test("a relative image in streamed text is its alt text, never fetched; the result's URL shows it", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { sessionId, answer, publish } = await seedSession(t, user, profileId, 1);
    const { page: p, problems } = await page(t, user);
    const images: string[] = [];
    p.on("request", (r) => void (r.resourceType() === "image" && images.push(new URL(r.url()).pathname)));
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await p.getByText(answer).waitFor();

    const s = t.app.services;
    const task = await s.tasks.create({ userId: user.id, sessionId, profileId, prompt: "Draw it", maxTurns: 10, maxBudgetUsd: 5 });
    publish({ type: "task:token", task_id: task.id, text: "Here it is: ![the chart](chart.png) and " });
    publish({ type: "task:token", task_id: task.id, text: "![a plot](out/plot.svg \"Plot\")." });
    await lastTurn(p).getByText("a plot").waitFor();
    await lastTurn(p).getByText("the chart").waitFor();
    await Bun.sleep(300);
    expect(await lastTurn(p).locator(".md img").count()).toBe(0);
    expect(images).toEqual([]);

    // turn.done's result has the picture as a URL the page can load (here a data: URL).
    const png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
    publish({ type: "turn.done", task_id: task.id, result_text: `Here it is: ![the chart](${png}).`, input_tokens: 1, output_tokens: 1, cost_usd: 0 });
    publish({ type: "task:done", task_id: task.id, status: "completed" });
    await lastTurn(p).locator(".md img[alt='the chart']").waitFor();
    expect(images.filter((i) => !i.startsWith("image/png"))).toEqual([]);
    expectClean(problems);
    await closePages();
  });
});

// -------------------------------------------------------------------------------------------------

describe("signed out elsewhere", () => {
  test("the page asks to sign in again; after signing in, the unsent message is still in the composer", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const { sessionId, answer } = await seedSession(t, user, profileId, 1);
    const { page: p, problems } = await page(t, user);
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await lastTurn(p).getByText(answer).waitFor();
    await composer(p).fill("A message I have not sent yet");

    // Another tab signs out: this login session ends, and its socket with it (4001).
    expect((await api(t, "POST", "/api/auth/sign-out", user.session)).status).toBe(200);
    await p.getByRole("heading", { name: "Sign in" }).waitFor();
    await p.getByRole("alert").filter({ hasText: "You were signed out" }).waitFor();
    await p.getByLabel("Email").fill(user.email);
    await p.getByLabel("Password").fill(user.password);
    await p.getByRole("button", { name: "Sign in", exact: true }).click();
    await lastTurn(p).getByText(answer).waitFor();
    expect(new URL(p.url()).pathname).toBe(`/sessions/${sessionId}`);
    expect(await composer(p).inputValue()).toBe("A message I have not sent yet");
    expectClean(problems);
    await closePages();
  });

  test("a view loaded after signing out elsewhere asks to sign in again, never shows an empty table", async () => {
    const user = await createUser(t);
    await createProfile(t, user, { mock });
    const { context, page: p, problems } = await page(t, user, { allow: [EXPECTED_4XX] });
    await context.addInitScript(watchFor(["No profiles yet."]));
    await p.goto(`${t.url}/tokens`);
    await p.getByRole("heading", { name: "API tokens" }).waitFor();
    expect((await api(t, "POST", "/api/auth/sign-out", user.session)).status).toBe(200);
    // The page may learn of it first from its stream (closed with 4001): then it asks at once and
    // the link is gone; else the view's requests answer 401. Either way: the sign-in, no empty list.
    await p
      .getByRole("navigation", { name: "Main" })
      .getByRole("link", { name: "Profiles" })
      .click({ timeout: 3_000 })
      .catch(() => {});
    await p.getByRole("alert").filter({ hasText: "You were signed out" }).waitFor();
    await p.getByRole("heading", { name: "Sign in" }).waitFor();
    expect((await seen(p))["No profiles yet."]).toBeUndefined();
    expectClean(problems);
    await closePages();
  });
});

// -------------------------------------------------------------------------------------------------

test("the profile picker shows a profile made elsewhere when it gets the focus", async () => {
  const user = await createUser(t);
  await createProfile(t, user, { mock });
  const { page: p, problems } = await page(t, user);
  await p.goto(t.url);
  const picker = p.getByRole("combobox", { name: "Profile" });
  await picker.waitFor();
  expect(await picker.locator("option").count()).toBe(1);
  const r = await api(t, "POST", "/v1/profiles", user.bearer, { name: "Made elsewhere", model: { provider: "demo", name: "demo" }, network: "none" });
  expect(r.status).toBe(201);
  await picker.focus();
  await picker.locator("option", { hasText: "Made elsewhere" }).waitFor({ state: "attached" });
  await picker.selectOption({ label: "Made elsewhere" });
  expect(await picker.inputValue()).toBe(r.body.id);
  expectClean(problems);
  await closePages();
});
