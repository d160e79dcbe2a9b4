/**
 * What the chat sends, in real Chromium against a real app (real workspaces, the local
 * Anthropic-format model server):
 *
 * - a message sent while the server cannot be reached stays in the composer and its saved draft
 *   (across a reload), the page says it is offline; once back, it is sent and leaves the box;
 * - each prompt shows above its own answer: a task another client submitted to the session (its
 *   first frame late) gets its own prompt, looked up, and the page's prompt goes to the page's task;
 * - a card of several questions takes a choice per question and sends one answer, one line per
 *   question; a double click on an option sends one answer;
 * - sign-out while the server cannot be reached says it failed and keeps the user signed in; a
 *   sign-out forgets the drafts and the last used profile; another account signing in to the tab
 *   never sees the previous one's drafts.
 *
 * Any console error, page error or CSP violation fails the test (expected ones aside).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createProfile, lastToolResults, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { type Browser, composer, expectClean, lastTurn, launchBrowser, openPage, type Page, pagePool, send, type WatchedPage } from "../helpers/browser.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let mock: MockProviderServer;
let browser: Browser;
let user: TestUser;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  browser = await launchBrowser();
  user = await createUser(t);
  await createProfile(t, user, { mock });
});
afterAll(async () => {
  await browser?.close();
  await mock?.stop();
  await t?.stop();
});

const pages = pagePool(() => browser);
const page = (u: TestUser | null, opts: Parameters<typeof openPage>[1] = {}): Promise<WatchedPage> => pages.open({ url: t.url, cookie: u?.cookie, ...opts });
const closePages = () => pages.closeAll();

/** Keeps the page's WebSockets in window.__sockets (to drop them). */
const KEEP_SOCKETS = `{ const Native = WebSocket; window.__sockets = [];
  window.WebSocket = class extends Native { constructor(...a) { super(...a); window.__sockets.push(this); } }; }`;
const dropSocket = (p: Page) => p.evaluate(() => (window as unknown as { __sockets: WebSocket[] }).__sockets.at(-1)!.close());
/** The browser's failures while offline (expected in the offline steps). */
const OFFLINE = [/WebSocket connection to .* failed/, /ERR_INTERNET_DISCONNECTED/];
const storage = (p: Page) =>
  p.evaluate(() => ({
    drafts: Object.keys(sessionStorage).filter((k) => k.startsWith("runcell.draft.")),
    lastProfile: localStorage.getItem("runcell.last_profile"),
  }));

/** A new session started from the page, its first answer shown; returns its id. */
async function startSession(p: Page, answer = "First answer."): Promise<string> {
  mock.enqueue({ text: answer });
  await p.goto(t.url);
  await send(p, "Hello");
  await p.waitForURL(/\/sessions\//);
  await lastTurn(p).getByText(answer).waitFor({ timeout: 30_000 });
  return new URL(p.url()).pathname.split("/").at(-1)!;
}

// -------------------------------------------------------------------------------------------------

describe("offline", () => {
  test("a message sent while the server cannot be reached stays in the composer and its draft, across a reload; sent once back", async () => {
    const { context, page: p, problems, allow } = await page(user);
    await context.addInitScript(KEEP_SOCKETS);
    mock.reset();
    const sessionId = await startSession(p);
    expect(await p.getByRole("status").filter({ hasText: "Offline" }).count()).toBe(0);

    allow.push(...OFFLINE);
    await context.setOffline(true);
    await dropSocket(p);
    await p.getByRole("status").filter({ hasText: "Offline" }).waitFor();
    await send(p, "Sent while offline");
    await p.getByRole("alert").filter({ hasText: "could not be reached" }).waitFor();
    expect(await composer(p).inputValue()).toBe("Sent while offline");
    expect(await p.evaluate((k) => sessionStorage.getItem(k), `runcell.draft.${sessionId}`)).toBe("Sent while offline");
    expect(await p.getByRole("article").count()).toBe(1);

    // Reloaded (the server back): the message is still there; now it is taken, and leaves the box.
    await context.setOffline(false);
    await p.reload();
    await lastTurn(p).getByText("First answer.").waitFor();
    expect(await composer(p).inputValue()).toBe("Sent while offline");
    allow.length = 0;
    mock.enqueue({ text: "Second answer." });
    await composer(p).press("Enter");
    await lastTurn(p).getByText("Second answer.").waitFor({ timeout: 30_000 });
    expect(await lastTurn(p).locator(".msg.user").textContent()).toBe("Sent while offline");
    expect(await composer(p).inputValue()).toBe("");
    expect((await storage(p)).drafts).toEqual([]);
    expect(await p.getByRole("status").filter({ hasText: "Offline" }).count()).toBe(0);
    expectClean(problems);
    await closePages();
  }, 60_000);
});

// -------------------------------------------------------------------------------------------------

describe("the session list", () => {
  test("a session started elsewhere (another tab, the API) shows up when the window gets the focus back", async () => {
    const owner = await createUser(t);
    const profileId = await createProfile(t, owner, { mock });
    const { page: p, problems } = await page(owner);
    await p.goto(t.url);
    await p.getByText("No sessions yet.").waitFor();
    mock.reset();
    mock.enqueue({ text: "From the API." });
    const sub = await api(t, "POST", "/v1/tasks", owner.bearer, { profile_id: profileId, prompt: "started through the API" });
    expect(sub.status).toBe(202);
    await p.evaluate(() => dispatchEvent(new Event("focus")));
    await p.getByRole("navigation", { name: "Sessions" }).getByText("started through the API").waitFor();
    await waitTask(t, owner, sub.body.task_id);
    expectClean(problems);
    await closePages();
  }, 60_000);
});

describe("a session whose profile was deleted", () => {
  test("shows why it takes no new message, with a link to start a new session, instead of a composer", async () => {
    const owner = await createUser(t);
    const profileId = await createProfile(t, owner, { mock });
    mock.reset();
    mock.enqueue({ text: "Before the profile went." });
    const sub = await api(t, "POST", "/v1/tasks", owner.bearer, { profile_id: profileId, prompt: "hello" });
    expect(sub.status).toBe(202);
    await waitTask(t, owner, sub.body.task_id);
    expect((await api(t, "DELETE", `/v1/profiles/${profileId}`, owner.bearer)).status).toBe(204);
    const { page: p, problems } = await page(owner);
    await p.goto(`${t.url}/sessions/${sub.body.session_id}`);
    await lastTurn(p).getByText("Before the profile went.").waitFor({ timeout: 30_000 });
    await p.getByRole("status").filter({ hasText: "profile was deleted" }).waitFor();
    expect(await p.locator(".composer textarea").count()).toBe(0);
    expect(await p.getByRole("link", { name: "Start a new session" }).count()).toBe(1);
    expectClean(problems);
    await closePages();
  }, 60_000);
});

describe("prompts", () => {
  test("another client's task (its first frame late) shows its own prompt, and the page's prompt goes above the page's answer", async () => {
    const { page: p, problems } = await page(user);
    mock.reset();
    const sessionId = await startSession(p);
    // The other client's task waits at the model until released; the page's is answered at once.
    let release = () => {};
    const gate = new Promise<void>((r) => (release = r));
    mock.script(async (req) => {
      const asked = JSON.stringify(req.body.messages.at(-1));
      if (asked.includes("From the other client")) {
        await gate;
        return { text: "The other client's answer." };
      }
      return { text: "The page's answer." };
    });
    const r = await api(t, "POST", "/v1/tasks", user.bearer, { session_id: sessionId, prompt: "From the other client" });
    expect(r.status).toBe(202);
    await mock.waitForRequests(2, 30_000);
    await send(p, "From the page");
    await Bun.sleep(300);
    release();

    const turnWith = (answer: string) => p.getByRole("article").filter({ hasText: answer });
    await turnWith("The other client's answer.").waitFor({ timeout: 30_000 });
    await turnWith("The page's answer.").waitFor({ timeout: 30_000 });
    expect(await turnWith("The other client's answer.").locator(".msg.user").textContent()).toBe("From the other client");
    expect(await turnWith("The page's answer.").locator(".msg.user").textContent()).toBe("From the page");
    expect(await p.getByRole("article").count()).toBe(3);
    mock.script(null);
    expectClean(problems);
    await closePages();
  }, 60_000);
});

// -------------------------------------------------------------------------------------------------

describe("questions", () => {
  test("several questions: a choice for each, one answer with a line per question; a double click sends one answer", async () => {
    const { page: p, problems } = await page(user);
    const sent: { type: string }[] = [];
    p.on("websocket", (ws) => ws.on("framesent", (f) => sent.push(JSON.parse(String(f.payload)))));
    mock.reset();
    mock.enqueue(
      {
        toolCalls: [
          {
            name: "AskUserQuestion",
            input: {
              questions: [
                { question: "Which color?", options: [{ label: "Red" }, { label: "Blue" }] },
                { question: "Which sizes?", options: [{ label: "Small" }, { label: "Large" }], multiSelect: true },
              ],
            },
          },
        ],
      },
      { text: "Blue, small and large." },
    );
    await p.goto(t.url);
    await send(p, "Ask me two things");
    await p.waitForURL(/\/sessions\//);
    const card = lastTurn(p).getByRole("group", { name: "The agent asks" });
    await card.getByRole("group", { name: "Which color?" }).waitFor({ timeout: 30_000 });
    const submit = card.getByRole("button", { name: "Send answers" });
    expect(await submit.isDisabled()).toBe(true);
    await card.getByRole("radio", { name: "Blue" }).check();
    // One question answered: nothing sent yet.
    expect(await submit.isDisabled()).toBe(true);
    await card.getByRole("checkbox", { name: "Small" }).check();
    await card.getByRole("checkbox", { name: "Large" }).check();
    expect(sent.filter((m) => m.type === "task.answer")).toEqual([]);
    await submit.click();
    await card.getByText(/^Answered: /).waitFor();
    await lastTurn(p).getByText("Blue, small and large.").waitFor({ timeout: 30_000 });
    expect(lastToolResults(mock.requests[1]!.body)[0]!.content).toBe("Which color?: Blue\nWhich sizes?: Small, Large");

    // One question, one choice: an option's button answers; clicked twice, it answers once.
    mock.enqueue({ toolCalls: [{ name: "AskUserQuestion", input: { questions: [{ question: "Ship it?", options: [{ label: "Yes" }, { label: "No" }] }] } }] }, { text: "Shipped." });
    await send(p, "One more");
    const card2 = lastTurn(p).getByRole("group", { name: "The agent asks" });
    await card2.getByText("Ship it?").waitFor({ timeout: 30_000 });
    await card2.getByRole("button", { name: "Yes" }).dblclick();
    await lastTurn(p).getByText("Shipped.").waitFor({ timeout: 30_000 });
    expect(sent.filter((m) => m.type === "task.answer").length).toBe(2);
    expect(await p.getByRole("alert").count()).toBe(0);
    expectClean(problems);
    await closePages();
  }, 90_000);
});

// -------------------------------------------------------------------------------------------------

describe("signing out", () => {
  test("while the server cannot be reached it says sign-out failed and stays; then it signs out and forgets drafts and the last profile", async () => {
    const u = await createUser(t);
    await createProfile(t, u, { mock });
    const { context, page: p, problems, allow } = await page(u);
    mock.reset();
    await startSession(p);
    await composer(p).fill("A draft of mine");
    expect((await storage(p)).drafts.length).toBe(1);
    expect((await storage(p)).lastProfile).not.toBeNull();

    allow.push(...OFFLINE);
    await context.setOffline(true);
    await p.getByRole("button", { name: "Sign out" }).click();
    await p.getByRole("alert").filter({ hasText: /^Sign-out failed: the server could not be reached/ }).waitFor();
    expect(await p.getByText(u.email).count()).toBe(1);
    expect(await composer(p).inputValue()).toBe("A draft of mine");
    expect((await api(t, "GET", "/v1/me", u.session)).status).toBe(200);

    await context.setOffline(false);
    await p.getByRole("button", { name: "Sign out" }).click();
    // Sign-out ends with a navigation to "/": the heading can show while it is still under way.
    await p.waitForURL((u) => u.pathname === "/");
    await p.waitForLoadState("load");
    await p.getByRole("heading", { name: "Sign in" }).waitFor();
    allow.length = 0;
    expect(await storage(p)).toEqual({ drafts: [], lastProfile: null });
    expect((await api(t, "GET", "/v1/me", u.session)).status).toBe(401);
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("signed out under the page, another account signing in to the tab does not see the drafts", async () => {
    const a = await createUser(t);
    const b = await createUser(t);
    await createProfile(t, a, { mock });
    await createProfile(t, b, { mock });
    const { page: p, problems, allow } = await page(a);
    mock.reset();
    await startSession(p);
    await composer(p).fill("Private draft of A");
    // Signed out elsewhere: a read the page makes before it learns so (the finished turn's
    // figures, the session list) is answered 401 — how it learns it, not a fault.
    allow.push(/status of 401/);
    expect((await api(t, "POST", "/api/auth/sign-out", a.session)).status).toBe(200);
    await p.getByRole("heading", { name: "Sign in" }).waitFor();
    await p.getByLabel("Email").fill(b.email);
    await p.getByLabel("Password").fill(b.password);
    await p.getByRole("button", { name: "Sign in", exact: true }).click();
    await p.getByText(b.email).waitFor();
    // A's session is not B's: the page says so, and B's new-session box is empty.
    await p.getByRole("heading", { name: "Session not found" }).waitFor();
    await p.goto(t.url);
    await composer(p).waitFor();
    expect(await composer(p).inputValue()).toBe("");
    expect((await storage(p)).drafts).toEqual([]);
    expectClean(problems);
    await closePages();
  }, 60_000);
});
