/**
 * The dashboard's accounts and chat in real Chromium (Debian's, driven by playwright-core), against
 * a real app, real workspaces (Docker) and the local Anthropic-format model server:
 *
 * - the setup link creates the admin account and signs in (also pasted into a tab already on
 *   /setup); sign-out; a wrong password, then the right one;
 * - a new user with no profile gets a link to create one, not a composer; with a profile, a message
 *   typed straight into the composer starts a session and streams its answer, rendered as markdown
 *   (heading, list, table, code with a working copy button, links opening in a new tab) while raw
 *   HTML in model output stays text; tokens and cost per turn and for the session;
 * - tool cards (name, input, output, duration; a failing tool's error), the platform's setup steps
 *   in words (a clone, an MCP server that failed to start), an MCP tool call; questions answered
 *   with an option button and with free text (then disabled);
 * - cancel during a turn, a failed task's code and message, a multi-chain run's `turn.continuing` marker;
 * - an answer cut off at the model's output limit (or refused) says so under it, live and replayed;
 * - a reload mid-stream and a dropped connection (resumed from before the unfinished turn): the
 *   answer ends up exactly once, and every text seen on the way was a prefix of it (no duplicated
 *   or missing text);
 * - a session of 10,000 events opens fast (the figure is printed), and a streamed 1 MB answer
 *   keeps the page responsive (the longest main-thread stall is printed).
 *
 * Any console error, page error or CSP violation fails the test it happens in.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createProfile, lastToolResults, sessionFrames, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { type Browser, expectClean, EXPECTED_4XX, launchBrowser, openPage, type Page, pagePool, screenshots, lastTurn, send, type WatchedPage } from "../helpers/browser.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let mock: MockProviderServer;
let browser: Browser;
/** Pages opened by a test, closed after it. */

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

/** $3 / $15 per million tokens: 1,200 in + 340 out = $0.0087. */
const PRICING = { input_per_mtok: 3, output_per_mtok: 15 };

const pages = pagePool(() => browser);
const page = (user: TestUser | null, opts: Parameters<typeof openPage>[1] = {}): Promise<WatchedPage> => pages.open({ url: t.url, cookie: user?.cookie, ...opts });
const closePages = () => pages.closeAll();

/** A turn's usage line once it has ended: "1,200 in · 340 out · $0.0087". */
const usageOf = (turn: ReturnType<typeof lastTurn>) => turn.getByText(/^[\d,]+ in · [\d,]+ out · \$[\d.]+$/);

const norm = (s: string) => s.replace(/\s+/g, " ").trim();

/**
 * An init script recording, at every animation frame, the text of the newest turn's last markdown
 * part whenever it changed (window.__samples). Each document starts over: after a reload, the
 * samples are what the reloaded page showed.
 */
const SAMPLER = `document.addEventListener("DOMContentLoaded", () => {
  window.__samples = [];
  let last = null;
  const tick = () => {
    const turns = document.querySelectorAll("article");
    const md = turns.length ? turns[turns.length - 1].querySelectorAll(".md") : [];
    const text = md.length ? md[md.length - 1].textContent : null;
    if (text !== null && text !== last) window.__samples.push(text);
    last = text;
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
});`;

/** Every sampled text must be a prefix of the expected answer (nothing doubled, nothing skipped), the last one all of it. */
async function expectPrefixes(p: Page, expected: string): Promise<number> {
  const samples: string[] = (await p.evaluate(() => (window as unknown as { __samples: string[] }).__samples)).map(norm);
  const want = norm(expected);
  for (const s of samples) if (!want.startsWith(s)) throw new Error(`a text shown on the way is not a prefix of the answer:\n  shown: …${s.slice(-200)}\n  want:  ${want.slice(0, 200)}…`);
  expect(samples.at(-1)).toBe(want);
  return samples.length;
}

/** Waits (up to 5 s) for the session's figures to read `text`, then checks they do. */
async function expectTotals(p: Page, text: string) {
  await p.waitForFunction((want) => document.querySelector('[aria-label="Session totals"]')?.textContent === want, text, { timeout: 5000 }).catch(() => undefined);
  expect(await p.getByLabel("Session totals").textContent()).toBe(text);
}

// -------------------------------------------------------------------------------------------------

describe("accounts", () => {
  const email = "owner@example.com";
  const password = "a long enough passphrase";

  test("the setup link creates the admin account and lands on the dashboard signed in; sign-out returns to the sign-in form", async () => {
    const { page: p, problems } = await page(null);
    const link = (await t.app.services.setup.issue())!;
    // Opened without its fragment, the page asks for the whole link; the link pasted into that
    // same tab (only the fragment changes: no reload) is read.
    await p.goto(`${t.url}/setup`);
    await p.getByText("Copy the whole link, including the part after").waitFor();
    await p.goto(`${t.url}/setup#${link.token}`);
    await p.getByLabel("Email").waitFor({ timeout: 5000 });
    expect(await p.getByText("Copy the whole link, including the part after").count()).toBe(0);
    // The token leaves the address bar as soon as it is read.
    expect(new URL(p.url()).hash).toBe("");
    await p.getByLabel("Email").fill(email);
    await p.getByLabel("Name (optional)").fill("Owner");
    await p.getByLabel("Password").fill(password);
    await p.getByRole("button", { name: "Create account and sign in" }).click();
    await p.waitForURL(`${t.url}/`);
    await p.getByText(`${email} (admin)`).waitFor();
    await p.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Admin" }).waitFor();
    await p.getByRole("button", { name: "Sign out" }).click();
    await p.getByRole("heading", { name: "Sign in" }).waitFor();
    expect(await p.getByText(email).count()).toBe(0);
    expectClean(problems);
    await closePages();
  });

  test("sign-in with a wrong password shows the error; the right one opens the dashboard", async () => {
    const { page: p, problems, allow } = await page(null);
    await p.goto(t.url);
    await p.getByLabel("Email").fill(email);
    await p.getByLabel("Password").fill("not the password");
    allow.push(EXPECTED_4XX); // the 401 of the wrong password, logged by Chrome as a failed load
    await p.getByRole("button", { name: "Sign in", exact: true }).click();
    await p.getByRole("alert").filter({ hasText: "Invalid email or password" }).waitFor();
    allow.pop();
    // Ready to try again: the focus is back on the password.
    await p.waitForFunction(() => (document.activeElement as HTMLInputElement | null)?.name === "password", null, { timeout: 5000 }).catch(() => undefined);
    expect(await p.evaluate(() => (document.activeElement as HTMLInputElement | null)?.name)).toBe("password");
    await p.getByLabel("Password").fill(password);
    await p.getByRole("button", { name: "Sign in", exact: true }).click();
    await p.getByText(`${email} (admin)`).waitFor();
    await p.getByRole("heading", { name: "New session" }).waitFor();
    expectClean(problems);
    await closePages();
  });

  test("first run: the admin makes a demo profile in the Profiles view and talks to it; its tool runs in the workspace", async () => {
    const { page: p, problems } = await page(null);
    await p.goto(t.url);
    await p.getByLabel("Email").fill(email);
    await p.getByLabel("Password").fill(password);
    await p.getByRole("button", { name: "Sign in", exact: true }).click();
    // No profile yet: the way to make one.
    await p.getByRole("link", { name: "Create a profile" }).click();
    await p.getByRole("heading", { name: "Profiles", level: 1 }).waitFor();
    const form = p.getByRole("form", { name: "New profile" });
    await form.getByLabel("Name", { exact: true }).fill("Demo agent");
    await form.getByLabel("Provider").selectOption("demo");
    await form.getByRole("button", { name: "Create profile" }).click();
    await p.getByRole("cell", { name: "Demo agent", exact: true }).waitFor();

    await p.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Sessions" }).click();
    await send(p, "Show me around");
    await p.waitForURL(/\/sessions\//);
    const turn = lastTurn(p);
    await usageOf(turn).waitFor({ timeout: 60_000 });
    await turn.getByText("That was the whole agent pipeline", { exact: false }).waitFor();
    const bash = turn.getByRole("group").filter({ has: p.getByText("Bash", { exact: true }) });
    await bash.locator("summary").click();
    expect(await bash.locator("pre").nth(1).textContent()).toContain("[exit code: 0]");
    expectClean(problems);
    await closePages();
  }, 90_000);
});

// -------------------------------------------------------------------------------------------------

describe("a new user's first session", () => {
  test("without a profile there is no composer, but a link to create a profile", async () => {
    const user = await createUser(t);
    const { page: p, problems } = await page(user);
    await p.goto(t.url);
    const create = p.getByRole("link", { name: "Create a profile" });
    await create.waitFor();
    expect(await p.getByRole("textbox", { name: "Message" }).count()).toBe(0);
    await create.click();
    await p.waitForURL(`${t.url}/profiles`);
    expectClean(problems);
    await closePages();
  });

  test("typed straight into the composer, Enter starts a session; the streamed answer renders as markdown, raw HTML stays text; tokens and cost per turn and per session", async () => {
    const user = await createUser(t);
    await createProfile(t, user, { mock, pricing: PRICING });
    const { page: p, problems } = await page(user, { context: { permissions: ["clipboard-read", "clipboard-write"] } });
    mock.reset();
    const code = "const answer = 42;\nconsole.log(answer);";
    const answer = [
      "# Findings",
      "",
      "Here is what I found, streamed piece by piece.",
      "",
      "- first point",
      "- second point",
      "",
      "| tool | runs |",
      "|------|------|",
      "| Bash | 3 |",
      "",
      "```js",
      code,
      "```",
      "",
      "Read [the docs](https://example.com/docs) for more.",
      "",
      'Inline <img src=https://x.invalid/p.png onerror="window.__pwned=1"> and <b>bold?</b>',
      "",
      "<script>window.__pwned = 2</script>",
      "",
    ].join("\n");
    mock.enqueue({ text: answer, chunks: 40, delayMs: 60, usage: { input_tokens: 1200, output_tokens: 340 } });

    await p.goto(t.url);
    await p.getByRole("heading", { name: "New session" }).waitFor();
    await expect(p.getByRole("combobox", { name: "Profile" }).inputValue()).resolves.toMatch(/^prof_/);
    await send(p, "Show me around");
    await p.waitForURL(/\/sessions\/sess_[a-z0-9]+$/);
    const sessionId = new URL(p.url()).pathname.split("/").pop()!;
    const turn = lastTurn(p);
    await turn.getByText("Show me around").waitFor();
    // Streamed: the start of the answer is shown while the turn still runs (it can be cancelled).
    await turn.getByRole("heading", { name: "Findings" }).waitFor();
    expect(await turn.getByRole("button", { name: "Cancel" }).isVisible()).toBe(true);

    // The end: markdown rendered by the dashboard.
    await usageOf(turn).waitFor({ timeout: 30_000 });
    expect(await turn.getByRole("button", { name: "Cancel" }).count()).toBe(0);
    expect(await turn.getByRole("heading", { level: 1, name: "Findings" }).count()).toBe(1);
    expect(await turn.getByRole("listitem").allTextContents()).toEqual(["first point", "second point"]);
    const table = turn.getByRole("table");
    expect(await table.getByRole("columnheader").allTextContents()).toEqual(["tool", "runs"]);
    expect(await table.getByRole("cell").allTextContents()).toEqual(["Bash", "3"]);
    expect(await turn.locator("pre code").textContent()).toBe(code);
    const link = turn.getByRole("link", { name: "the docs" });
    expect(await link.getAttribute("href")).toBe("https://example.com/docs");
    expect(await link.getAttribute("target")).toBe("_blank");
    expect((await link.getAttribute("rel"))?.split(/\s+/)).toContain("noopener");
    // The code block's copy button puts the code on the clipboard.
    await turn.getByRole("button", { name: "Copy" }).click();
    await turn.getByRole("button", { name: "Copied" }).waitFor();
    expect(await p.evaluate(() => navigator.clipboard.readText())).toBe(code);

    // Raw HTML in model output is text, never markup.
    const md = turn.locator(".md");
    expect(await md.locator("img, script, b").count()).toBe(0);
    expect(await md.textContent()).toContain('<img src=https://x.invalid/p.png onerror="window.__pwned=1">');
    expect(await md.textContent()).toContain("<script>window.__pwned = 2</script>");
    expect(await p.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();

    // Tokens and cost: the turn's and the session's.
    expect(await usageOf(turn).textContent()).toBe("1,200 in · 340 out · $0.0087");
    await expectTotals(p, "1,200 tokens in · 340 out · $0.0087");

    // A second message in the same session: its own figures, and the session's sum.
    mock.enqueue({ text: "Second answer.", usage: { input_tokens: 800, output_tokens: 100 } });
    await send(p, "And then?");
    const second = lastTurn(p);
    await second.getByText("And then?").waitFor();
    await usageOf(second).waitFor({ timeout: 30_000 });
    expect(await p.getByRole("article").count()).toBe(2);
    expect(await second.getByText("Second answer.").count()).toBe(1);
    expect(await usageOf(second).textContent()).toBe("800 in · 100 out · $0.0039");
    await expectTotals(p, "2,000 tokens in · 440 out · $0.01");
    expect(p.url()).toBe(`${t.url}/sessions/${sessionId}`);

    // The session is in the list, titled by its first message, with its cost so far.
    await p.getByRole("navigation", { name: "Sessions" }).getByRole("link", { name: /^Show me around.*\$0\.01/ }).waitFor();
    await screenshots(p, "chat-answer");
    expectClean(problems);
    await closePages();
  }, 90_000);
});

// -------------------------------------------------------------------------------------------------

describe("tools and questions", () => {
  let user: TestUser;
  beforeAll(async () => {
    user = await createUser(t);
    await createProfile(t, user, { mock });
  });

  test("tool cards show the tool, its input, output and duration; a failing tool shows its error", async () => {
    const { page: p, problems } = await page(user);
    mock.reset();
    mock.enqueue(
      { text: "Let me check.", toolCalls: [{ name: "Bash", input: { command: "echo tool-output-42" } }] },
      { toolCalls: [{ name: "Read", input: { file_path: "/workspace/missing.txt" } }] },
      { text: "Both tools ran." },
    );
    await p.goto(t.url);
    await send(p, "Use your tools");
    await p.waitForURL(/\/sessions\//);
    const turn = lastTurn(p);
    await usageOf(turn).waitFor({ timeout: 60_000 });
    await turn.getByText("Both tools ran.").waitFor();

    const bash = turn.getByRole("group").filter({ has: p.getByText("Bash", { exact: true }) });
    expect(await bash.count()).toBe(1);
    expect(await bash.locator("summary").textContent()).toMatch(/echo tool-output-42\s*(\d+ ms|\d+\.\d s)$/);
    await bash.locator("summary").click();
    await bash.getByRole("heading", { name: "Input" }).waitFor();
    expect(JSON.parse((await bash.locator("pre").first().textContent())!)).toEqual({ command: "echo tool-output-42" });
    await bash.getByRole("heading", { name: "Output" }).waitFor();
    expect(await bash.locator("pre").nth(1).textContent()).toBe("tool-output-42\n[exit code: 0]");

    const read = turn.getByRole("group").filter({ has: p.getByText("Read", { exact: true }) });
    expect(await read.locator("summary").textContent()).toMatch(/\/workspace\/missing\.txt\s*error$/);
    await read.locator("summary").click();
    await read.getByRole("heading", { name: "Error" }).waitFor();
    const error = await read.locator("pre").nth(1).textContent();
    expect(error).toContain("missing.txt");
    // What the model was told is what the card shows.
    expect(lastToolResults(mock.requests[2]!.body)).toEqual([expect.objectContaining({ content: error, is_error: true })]);
    await screenshots(p, "chat-tools");
    expectClean(problems);
    await closePages();
  }, 90_000);

  test("the platform's setup steps read as words (a repository cloned, an MCP server that failed to start); an MCP tool call shows its name and input", async () => {
    // Frames as src/agents/run-setup.ts and the loop publish them, written through the hub.
    const s = t.app.services;
    const profileId = (await api(t, "GET", "/v1/profiles", user.bearer)).body.data[0].id as string;
    const session = await s.agentSessions.create(user.id, profileId, "Setup steps");
    const task = await s.tasks.create({ userId: user.id, sessionId: session.id, profileId, prompt: "Fix the widget bug", maxTurns: 10, maxBudgetUsd: 5 });
    const publish = (f: Parameters<typeof s.hub.publish>[1]) => s.hub.publish(session.id, f);
    const pair = (tool: string, id: string, input: Record<string, unknown>, output: string, isError = false) => {
      publish({ type: "task:tool_use", task_id: task.id, tool, tool_use_id: id, input });
      publish({ type: "task:tool_result", task_id: task.id, tool, tool_use_id: id, output, is_error: isError });
    };
    const url = "https://git.example.com/acme/widgets.git";
    pair("GitClone", "setup_0123456789abcdef01234567", { url, ref: "main", path: "/workspace/widgets" }, `Cloned ${url} (main) into /workspace/widgets at 0123abc (0.1 MiB in 0.2 s)`);
    pair("mcp__tracker", "setup_89abcdef0123456789abcdef", { server: "tracker" }, 'MCP server "tracker" could not start or list its tools: connection refused. Its tools are not available in this task.', true);
    pair("mcp__files__read_file", "toolu_mcp_1", { path: "/workspace/widgets/README.md" }, "# Widgets");
    publish({ type: "turn.done", task_id: task.id, result_text: "Read the README.", input_tokens: 100, output_tokens: 10, cost_usd: 0.0005 });
    publish({ type: "task:done", task_id: task.id, status: "completed" });
    await s.tasks.update(task.id, { status: "completed", result_text: "Read the README.", input_tokens: 100, output_tokens: 10, cost_usd: 0.0005, turns: 1, started_at: Date.now(), finished_at: Date.now() });
    s.eventLog.flush();

    const { page: p, problems } = await page(user);
    await p.goto(`${t.url}/sessions/${session.id}`);
    const turn = lastTurn(p);
    await turn.getByText("Read the README.").waitFor({ timeout: 30_000 });
    const card = (text: string) => turn.getByRole("group").filter({ has: p.locator("summary", { hasText: text }) });
    const clone = card("Cloning");
    expect(norm((await clone.locator("summary").textContent())!)).toBe(`Cloning ${url} (main) into /workspace/widgetsdone`);
    const mcp = card("Starting MCP server");
    expect(norm((await mcp.locator("summary").textContent())!)).toBe("Starting MCP server trackererror");
    expect(await mcp.getAttribute("class")).toContain("failed");
    await mcp.locator("summary").click();
    await mcp.getByRole("heading", { name: "Error" }).waitFor();
    expect(await mcp.locator("pre").nth(1).textContent()).toContain("connection refused");
    const call = card("mcp__files__read_file");
    expect(norm((await call.locator("summary").textContent())!)).toBe('mcp__files__read_file {"path":"/workspace/widgets/README.md"}done');
    await screenshots(p, "chat-setup", ["light", "phone"]);
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("a question answered by clicking an option, then one answered with free text; each card is disabled once answered", async () => {
    const { page: p, problems } = await page(user);
    mock.reset();
    const ask = (question: string, labels: string[]) => ({
      toolCalls: [{ name: "AskUserQuestion", input: { questions: [{ question, options: labels.map((label) => ({ label })) }] } }],
    });
    mock.enqueue(ask("Which color?", ["Red", "Blue"]), { text: "You chose blue." });
    await p.goto(t.url);
    await send(p, "Ask me something");
    await p.waitForURL(/\/sessions\//);
    const card = lastTurn(p).getByRole("group", { name: "The agent asks" });
    await card.getByText("Which color?").waitFor({ timeout: 30_000 });
    const blue = card.getByRole("button", { name: "Blue" });
    expect(await blue.isEnabled()).toBe(true);
    await blue.click();
    await card.getByText("Answered: Blue").waitFor();
    expect(await blue.isDisabled()).toBe(true);
    expect(await card.getByRole("button", { name: "Red" }).isDisabled()).toBe(true);
    await lastTurn(p).getByText("You chose blue.").waitFor({ timeout: 30_000 });
    expect(lastToolResults(mock.requests[1]!.body)[0]!.content).toBe("Blue");

    mock.enqueue(ask("Anything else?", ["No"]), { text: "Noted: green." });
    await send(p, "One more");
    const card2 = lastTurn(p).getByRole("group", { name: "The agent asks" });
    await card2.getByText("Anything else?").waitFor({ timeout: 30_000 });
    await card2.getByRole("textbox", { name: "Your answer" }).fill("Green, please");
    await card2.getByRole("button", { name: "Answer" }).click();
    await card2.getByText("Answered: Green, please").waitFor();
    expect(await card2.getByRole("button", { name: "No" }).isDisabled()).toBe(true);
    expect(await card2.getByRole("textbox", { name: "Your answer" }).count()).toBe(0);
    await lastTurn(p).getByText("Noted: green.").waitFor({ timeout: 30_000 });
    expect(lastToolResults(mock.requests[3]!.body)[0]!.content).toBe("Green, please");
    // The first card stayed answered.
    expect(await p.getByRole("article").first().getByText("Answered: Blue").count()).toBe(1);
    expectClean(problems);
    await closePages();
  }, 90_000);
});

// -------------------------------------------------------------------------------------------------

describe("cancel, failures, chains", () => {
  let user: TestUser;
  let profileId: string;
  beforeAll(async () => {
    user = await createUser(t);
    profileId = await createProfile(t, user, { mock });
  });

  test("the cancel button stops a long-running turn", async () => {
    const { page: p, problems } = await page(user);
    mock.reset();
    mock.enqueue({ text: "Working on it, slowly and at length", hangAfter: 2 });
    await p.goto(t.url);
    await send(p, "Take your time");
    await p.waitForURL(/\/sessions\//);
    const turn = lastTurn(p);
    await turn.getByText(/Working on/).waitFor({ timeout: 30_000 });
    await turn.getByRole("button", { name: "Cancel" }).click();
    await turn.getByText("cancelled").waitFor({ timeout: 30_000 });
    // The footer reads "cancelled" (after the usage, if any), with no separator in front.
    expect(norm((await turn.locator("footer").textContent())!)).toMatch(/^(cancelled|[\d,]+ in · [\d,]+ out · \$[\d.]+ · cancelled)$/);
    expect(await turn.getByRole("button", { name: "Cancel" }).count()).toBe(0);
    expect(await p.getByRole("button", { name: "Cancel" }).count()).toBe(0);
    const tasks = await api(t, "GET", `/v1/tasks?session_id=${new URL(p.url()).pathname.split("/").pop()}`, user.bearer);
    expect(tasks.body.data[0].status).toBe("cancelled");
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("a failed task shows its code and message", async () => {
    const { page: p, problems } = await page(user);
    mock.reset();
    mock.enqueue({ error: { status: 400, message: "prompt is too long" } });
    await p.goto(t.url);
    await send(p, "This will fail");
    await p.waitForURL(/\/sessions\//);
    const alert = lastTurn(p).getByRole("alert");
    await alert.waitFor({ timeout: 30_000 });
    const tasks = await api(t, "GET", `/v1/tasks?session_id=${new URL(p.url()).pathname.split("/").pop()}`, user.bearer);
    const task = tasks.body.data[0];
    expect(task.status).toBe("failed");
    expect(task.error.code).toBe("MODEL_ERROR");
    expect(await alert.textContent()).toBe(`${task.error.code}: ${task.error.message}`);
    expect(await lastTurn(p).getByRole("button", { name: "Cancel" }).count()).toBe(0);
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("an answer cut off at the model's output limit says so under it, live and after a reload; a refused one says it was declined; a whole one says nothing", async () => {
    const { page: p, problems } = await page(user);
    mock.reset();
    mock.enqueue({ text: "The story begins on a dark and", stopReason: "max_tokens" }, { text: "I can't help with that.", stopReason: "refusal" }, { text: "A whole answer." });
    await p.goto(t.url);
    await send(p, "Tell me a long story");
    await p.waitForURL(/\/sessions\//);
    const cut = lastTurn(p).getByRole("note").filter({ hasText: "Cut off at the model's output limit" });
    await cut.waitFor({ timeout: 30_000 });
    // Under the answer, which stays as the model left it.
    await lastTurn(p).getByText("The story begins on a dark and").waitFor();
    expect(await lastTurn(p).locator(".msg.agent > *").evaluateAll((els) => els.map((e) => e.getAttribute("role") ?? e.className))).toEqual(["md", "note", "meta"]);

    await send(p, "Something it refuses");
    await p.getByRole("article").nth(1).getByRole("note").filter({ hasText: "The model declined to answer." }).waitFor({ timeout: 30_000 });
    await send(p, "Something simple");
    await p.getByRole("article").nth(2).getByText("A whole answer.").waitFor({ timeout: 30_000 });
    await usageOf(p.getByRole("article").nth(2)).waitFor({ timeout: 30_000 });
    expect(await p.getByRole("article").nth(2).getByRole("note").count()).toBe(0);

    // The replayed turn.done frames carry it too.
    await p.reload();
    await p.getByRole("article").nth(2).getByText("A whole answer.").waitFor({ timeout: 30_000 });
    expect(await p.getByRole("article").first().getByRole("note").textContent()).toBe("Cut off at the model's output limit: this answer is incomplete.");
    expect(await p.getByRole("article").nth(1).getByRole("note").textContent()).toBe("The model declined to answer.");
    expect(await p.getByRole("article").nth(2).getByRole("note").count()).toBe(0);
    expectClean(problems);
    await closePages();
  }, 90_000);

  test("a multi-chain run shows where it continued in a new chain", async () => {
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "ContinueInNewChain", input: { handoff: "Step one is done; do step two." } }] }, { text: "Step two done." });
    const pb = await api(t, "POST", "/v1/playbooks", user.bearer, { name: "Two steps", profile_id: profileId, prompt: "Do both steps", max_continuations: 1 });
    expect(pb.status, JSON.stringify(pb.body)).toBe(201);
    const run = await api(t, "POST", `/v1/playbooks/${pb.body.id}/run`, user.bearer, {});
    expect(run.status).toBe(202);
    expect((await waitTask(t, user, run.body.task_id)).status).toBe("completed");

    const { page: p, problems } = await page(user);
    await p.goto(`${t.url}/sessions/${run.body.session_id}`);
    const turn = lastTurn(p);
    await turn.getByRole("note").filter({ hasText: "Continuing in a new chain (1 of 1)" }).waitFor();
    await turn.getByText("Step two done.").waitFor();
    await turn.getByText("Do both steps").waitFor();
    expectClean(problems);
    await closePages();
  }, 60_000);
});

// -------------------------------------------------------------------------------------------------

describe("resume", () => {
  let user: TestUser;
  beforeAll(async () => {
    user = await createUser(t);
    await createProfile(t, user, { mock });
  });
  /** 400 words streamed one at a time, 10 ms apart: about 4 s of streaming. */
  const words = Array.from({ length: 400 }, (_, i) => `w${i + 1}`).join(" ");

  test("a reload mid-stream shows the answer exactly once: nothing doubled, nothing missing", async () => {
    const { context, page: p, problems } = await page(user);
    await context.addInitScript(SAMPLER);
    mock.reset();
    mock.enqueue({ text: words, delayMs: 10 });
    await p.goto(t.url);
    await send(p, "Count to 400");
    await p.waitForURL(/\/sessions\//);
    await lastTurn(p).getByText(/\bw40\b/).waitFor({ timeout: 30_000 });
    await p.reload();
    await lastTurn(p).getByText(/\bw60\b/).waitFor({ timeout: 30_000 });
    // Still streaming after the reload.
    expect(await lastTurn(p).getByRole("button", { name: "Cancel" }).count()).toBe(1);
    await usageOf(lastTurn(p)).waitFor({ timeout: 30_000 });
    const samples = await expectPrefixes(p, words);
    expect(samples).toBeGreaterThan(2);
    expect(await p.getByRole("article").count()).toBe(1);
    expect(await p.getByText(/\bw400\b/).count()).toBe(1);
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("a dropped connection reconnects by itself and resumes from before the unfinished turn: nothing doubled, nothing missing", async () => {
    const { context, page: p, problems, allow } = await page(user);
    await context.addInitScript(SAMPLER);
    // The page's sockets, to drop them; and what the page sends on them.
    await context.addInitScript(`{ const Native = WebSocket; window.__sockets = [];
      window.WebSocket = class extends Native { constructor(...a) { super(...a); window.__sockets.push(this); } }; }`);
    const sent: { type: string; after?: number }[] = [];
    p.on("websocket", (ws) => ws.on("framesent", (f) => sent.push(JSON.parse(String(f.payload)))));
    mock.reset();
    mock.enqueue({ text: words, delayMs: 10 });
    await p.goto(t.url);
    await send(p, "Count to 400 again");
    await p.waitForURL(/\/sessions\//);
    await lastTurn(p).getByText(/\bw40\b/).waitFor({ timeout: 30_000 });

    // The network goes away and the socket with it; reconnecting fails while offline.
    allow.push(/WebSocket connection to .* failed/, /ERR_INTERNET_DISCONNECTED/);
    await context.setOffline(true);
    await p.evaluate(() => (window as unknown as { __sockets: WebSocket[] }).__sockets.at(-1)!.close());
    await Bun.sleep(200); // a frame that arrived just before is drawn at the next animation frame
    const shown = norm((await lastTurn(p).locator(".md").last().textContent())!);
    await Bun.sleep(1200);
    // Nothing arrived meanwhile; the agent went on.
    expect(norm((await lastTurn(p).locator(".md").last().textContent())!)).toBe(shown);
    await context.setOffline(false);
    await usageOf(lastTurn(p)).waitFor({ timeout: 30_000 });
    allow.length = 0;

    await expectPrefixes(p, words);
    expect(await p.getByText(/\bw400\b/).count()).toBe(1);
    const resumes = sent.filter((m) => m.type === "session.resume");
    // The first resume follows the new session from the start; the one after the drop from the
    // last frame before the unfinished turn began (the replay rebuilds the turn: a server that
    // restarted meanwhile would have streamed its answer again from the start).
    expect(resumes.length).toBeGreaterThanOrEqual(2);
    const frames = await sessionFrames(t, user, p.url().split("/sessions/")[1]!);
    const first = frames.findIndex((f) => f.task_id);
    expect(first).toBeGreaterThan(0);
    expect(resumes.at(-1)!.after).toBe(frames[first - 1].seq);
    expect(await p.evaluate(() => (window as unknown as { __sockets: WebSocket[] }).__sockets.filter((s) => s.readyState === WebSocket.OPEN).length)).toBe(1);
    expectClean(problems);
    await closePages();
  }, 60_000);
});

// -------------------------------------------------------------------------------------------------

/**
 * A session whose event log holds exactly `events` frames, written through the app's own services
 * (the hub, as the agent loop does): task rows with prompts, then per turn (`perTurn` events)
 * streamed tokens, tool calls with results (one in ten failing), now and then a question and its
 * answer, turn.done and task:done. Returns the session, its number of turns and the last answer.
 */
async function seedLongSession(user: TestUser, profileId: string, events: number, perTurn = 20) {
  const s = t.app.services;
  const session = await s.agentSessions.create(user.id, profileId, "A long session");
  const publish = (f: Parameters<typeof s.hub.publish>[1]) => s.hub.publish(session.id, f);
  publish({ type: "session.ready", container_id: "ctr_00000000000000000000000000", container_name: "runcell-seeded", profile_id: profileId });
  let left = events - 1;
  let turn = 0;
  let answer = "";
  while (left > 0) {
    turn++;
    const task = await s.tasks.create({ userId: user.id, sessionId: session.id, profileId, prompt: `Question ${turn}: what about part ${turn}?`, maxTurns: 10, maxBudgetUsd: 5 });
    const budget = Math.min(left, perTurn);
    const fixed = 2; // turn.done, task:done
    let body = budget - fixed;
    const ask = turn % 25 === 0 && body >= 6;
    const tools = Math.min(3, Math.floor((body - (ask ? 3 : 0)) / 3));
    let text = "";
    const token = (piece: string) => {
      text += piece;
      publish({ type: "task:token", task_id: task.id, text: piece });
      body--;
    };
    token(`Looking into part ${turn}. `);
    for (let i = 0; i < tools; i++) {
      const id = `toolu_seed_${turn}_${i}`;
      const failing = (turn + i) % 10 === 0;
      publish({ type: "task:tool_use", task_id: task.id, tool: "Bash", tool_use_id: id, input: { command: `ls -la /workspace/part${turn}/${i}` } });
      publish({ type: "task:tool_result", task_id: task.id, tool: "Bash", tool_use_id: id, output: failing ? "ls: cannot access: No such file or directory\n[exit code: 2]" : `total 8\n-rw-r--r-- 1 root root 120 notes-${i}.md\n[exit code: 0]`, is_error: failing });
      body -= 2;
    }
    if (ask) {
      const id = `toolu_seed_${turn}_ask`;
      publish({ type: "task:tool_use", task_id: task.id, tool: "AskUserQuestion", tool_use_id: id, input: { questions: [{ question: "Go on?", options: [{ label: "Yes" }, { label: "No" }] }] } });
      publish({ type: "task:ask_user", task_id: task.id, questions: [{ question: "Go on?", options: [{ label: "Yes" }, { label: "No" }] }] });
      publish({ type: "task:tool_result", task_id: task.id, tool: "AskUserQuestion", tool_use_id: id, output: "Yes", is_error: false });
      body -= 3;
    }
    while (body > 0) token(body % 4 === 0 ? `**Point ${body}**: part ${turn} is fine. ` : `more words about part ${turn} `);
    // The polished result replaces the streamed text (plain here, so the test can find it as written).
    answer = `Answer ${turn}: part ${turn} checked, ${text.length} characters streamed.`;
    publish({ type: "turn.done", task_id: task.id, result_text: answer, input_tokens: 1500, output_tokens: 120, cost_usd: 0.0063 });
    publish({ type: "task:done", task_id: task.id, status: "completed" });
    await s.tasks.update(task.id, { status: "completed", result_text: answer, input_tokens: 1500, output_tokens: 120, cost_usd: 0.0063, turns: 1, started_at: Date.now(), finished_at: Date.now() });
    await s.agentSessions.addUsage(session.id, 1500, 120, 0.0063);
    left -= budget;
  }
  s.eventLog.flush();
  expect((await s.eventLog.bound(session.id)).seq).toBe(events);
  return { sessionId: session.id, turns: turn, answer };
}

/** An init script: window.__openedAt = performance.now() (ms since navigation start) when the transcript first contains `text`. */
const openedAtScript = (text: string) => `{
  const text = ${JSON.stringify(text)};
  const check = () => { if (document.querySelector(".transcript")?.textContent?.includes(text)) { window.__openedAt = performance.now(); obs.disconnect(); } };
  const obs = new MutationObserver(check);
  document.addEventListener("DOMContentLoaded", () => obs.observe(document.body, { childList: true, subtree: true, characterData: true }));
}`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Chromium with no driver attached to its pages but a bare DevTools connection: Playwright enables
 * the Network domain on every page, which reports each WebSocket frame to the test process — on a
 * 10,000-frame replay that costs about as much as the replay itself. This measures the page as a
 * user's browser runs it.
 */
async function bareChromium() {
  const dir = mkdtempSync(join(tmpdir(), "runcell-chromium-"));
  const proc = Bun.spawn(
    [process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run", "--remote-debugging-port=0", `--user-data-dir=${dir}`, "about:blank"],
    { stdout: "ignore", stderr: "pipe" },
  );
  const reader = proc.stderr.getReader();
  let log = "";
  let m: RegExpMatchArray | null = null;
  while (!(m = log.match(/DevTools listening on (ws:\/\/\S+)/))) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`chromium did not start: ${log}`);
    log += new TextDecoder().decode(value);
  }
  void (async () => {
    while (!(await reader.read()).done);
  })();
  const ws = new WebSocket(m[1]!);
  await new Promise((r) => (ws.onopen = r));
  let id = 0;
  const waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  ws.onmessage = (e) => {
    const msg = JSON.parse(String(e.data));
    const w = msg.id ? waiting.get(msg.id) : undefined;
    if (!w) return;
    waiting.delete(msg.id);
    if (msg.error) w.reject(new Error(msg.error.message));
    else w.resolve(msg.result);
  };
  const send = (method: string, params: object = {}, sessionId?: string): Promise<any> =>
    new Promise((resolve, reject) => {
      waiting.set(++id, { resolve, reject });
      ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  return {
    send,
    async close() {
      ws.close();
      proc.kill();
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe("long sessions", () => {
  let user: TestUser;
  let profileId: string;
  beforeAll(async () => {
    user = await createUser(t);
    profileId = await createProfile(t, user, { mock });
  });

  test("a session of 10,000 events opens fast (replay received and rendered)", async () => {
    const { sessionId, turns, answer } = await seedLongSession(user, profileId, 10_000);
    const { context, page: p, problems } = await page(user);
    await context.addInitScript(openedAtScript(answer));
    await p.goto(t.url); // the assets are cached from here on (hashed, immutable), as for a returning user
    await p.getByRole("heading", { name: "New session" }).waitFor();

    const inPage: number[] = [];
    const wall: number[] = [];
    for (let run = 0; run < 3; run++) {
      const started = performance.now();
      await p.goto(`${t.url}/sessions/${sessionId}`);
      await lastTurn(p).getByText(answer).waitFor({ timeout: 30_000 });
      wall.push(Math.round(performance.now() - started));
      inPage.push(Math.round(await p.evaluate(() => (window as unknown as { __openedAt: number }).__openedAt)));
    }
    // The newest turns are shown whole, the older ones behind a button.
    expect(await lastTurn(p).getByText(`Question ${turns}: what about part ${turns}?`).count()).toBe(1);
    expect(await p.getByRole("button", { name: /earlier turns/ }).count()).toBe(1);
    await expectTotals(p, `${(1500 * turns).toLocaleString("en-US")} tokens in · ${(120 * turns).toLocaleString("en-US")} out · $${(0.0063 * turns).toFixed(2)}`);
    expectClean(problems);
    await closePages();

    // The same page in a browser no test driver is attached to.
    const bare = await bareChromium();
    const plain: number[] = [];
    try {
      const [name, value] = user.cookie.split("=") as [string, string];
      await bare.send("Storage.setCookies", { cookies: [{ name, value, url: t.url }] });
      const { targetId } = await bare.send("Target.createTarget", { url: "about:blank" });
      const { sessionId: cdp } = await bare.send("Target.attachToTarget", { targetId, flatten: true });
      await bare.send("Page.enable", {}, cdp);
      await bare.send("Page.addScriptToEvaluateOnNewDocument", { source: openedAtScript(answer) }, cdp);
      for (let run = 0; run < 4; run++) {
        await bare.send("Page.navigate", { url: `${t.url}/sessions/${sessionId}` }, cdp);
        const r = await bare.send(
          "Runtime.evaluate",
          { expression: "new Promise((r) => { const f = () => (window.__openedAt ? r(window.__openedAt) : setTimeout(f, 20)); f(); })", awaitPromise: true, returnByValue: true },
          cdp,
        );
        if (run > 0) plain.push(Math.round(r.result.value)); // the first one loads the assets
      }
    } finally {
      await bare.close();
    }
    console.log(
      `10,000-event session opened in ${median(plain)} ms (median of ${plain.join(", ")} ms; navigation start → last turn rendered, Chromium without a driver); ` +
        `${median(inPage)} ms under Playwright (${inPage.join(", ")} ms; ${wall.join(", ")} ms by the test's clock)`,
    );
    // Generous bounds: CI noise must never fail this; the figure printed is what to look at (goal ≤ 1 s).
    expect(median(plain)).toBeLessThan(5_000);
    expect(median(inPage)).toBeLessThan(5_000);
  }, 120_000);

  test("a session of more than 1,000 turns shows them in order, the newest last", async () => {
    const { sessionId, turns, answer } = await seedLongSession(user, profileId, 4_404, 4);
    expect(turns).toBe(1_101);
    const { page: p, problems } = await page(user);
    await p.goto(`${t.url}/sessions/${sessionId}`);
    await lastTurn(p).getByText(answer).waitFor({ timeout: 30_000 });
    await lastTurn(p).getByText(`Question ${turns}: what about part ${turns}?`).waitFor();
    const labels = await p.getByRole("article").evaluateAll((els) => els.map((e) => e.textContent ?? ""));
    expect(labels.map((l) => Number(/^Question (\d+)/.exec(l)?.[1]))).toEqual(Array.from({ length: 40 }, (_, i) => turns - 39 + i));
    expectClean(problems);
    await closePages();
  }, 60_000);

  test("a streamed 1 MB answer keeps the page responsive", async () => {
    const { page: p, problems } = await page(user);
    const section = (i: number) =>
      `## Section ${i}\n\nParagraph ${i} explains one more part with **bold** words, \`inline code\` and [a link](https://example.com/${i}).\n\n- point one of ${i}\n- point two of ${i}\n\n\`\`\`ts\nconst value${i} = compute(${i});\n\`\`\`\n\n`;
    let text = "";
    let sections = 0;
    while (text.length < 1_000_000) text += section(sections++);
    const pieces: string[] = [];
    for (let i = 0; i < text.length; i += 1000) pieces.push(text.slice(i, i + 1000));
    mock.reset();
    mock.enqueue({ text: pieces, delayMs: 2, usage: { input_tokens: 100, output_tokens: 1000 } });

    await p.goto(t.url);
    await p.getByRole("heading", { name: "New session" }).waitFor();
    // The probe: the gaps between animation frames (a stalled main thread delays the next one).
    await p.evaluate(() => {
      const w = window as unknown as { __gaps: number[] };
      w.__gaps = [];
      let last = performance.now();
      const frame = (now: number) => {
        w.__gaps.push(now - last);
        last = now;
        requestAnimationFrame(frame);
      };
      requestAnimationFrame(frame);
    });
    const started = performance.now();
    await send(p, "Write a lot");
    // Cheap waits only: a locator query over a megabyte of DOM would itself stall the page.
    await p.waitForFunction(() => /^[\d,]+ in · /.test(document.querySelector("article:last-of-type footer span")?.textContent ?? ""), null, { timeout: 120_000, polling: 250 });
    const ms = Math.round(performance.now() - started);
    await Bun.sleep(300);
    const gaps: number[] = await p.evaluate(() => (window as unknown as { __gaps: number[] }).__gaps);
    const stall = Math.round(Math.max(...gaps));
    const over = gaps.filter((g) => g > 200).length;
    console.log(`1 MB answer (${pieces.length} deltas) streamed and rendered in ${ms} ms; longest main-thread stall ${stall} ms; ${over} of ${gaps.length} frames over 200 ms`);
    const shown = await p.evaluate(() => {
      const md = document.querySelector("article:last-of-type .md");
      return { h2: md?.querySelectorAll("h2").length ?? 0, chars: md?.textContent?.length ?? 0 };
    });
    expect(shown.h2).toBe(sections);
    expect(shown.chars).toBeGreaterThan(700_000);
    // Generous: a stall of seconds (the whole answer rendered at once) fails; the goal is ≤ ~200 ms.
    expect(stall).toBeLessThan(1_000);
    expectClean(problems);
    await closePages();
  }, 180_000);
});
