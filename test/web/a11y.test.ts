/**
 * Accessibility and layout of every dashboard view, in real Chromium: axe-core finds no serious
 * or critical violation (in the light and the dark theme; the others are printed), no view
 * overflows a 390 px phone screen horizontally, and a screenshot of each view in light, dark and
 * phone width lands in test-artifacts/screenshots/<view>-<light|dark|phone>.png. The chat composer
 * is reached with Tab and sends with Enter. Any console error, page error or CSP violation fails.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { createProfile, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser } from "../helpers/browser.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import type { MockProviderServer } from "../helpers/mock-provider.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

const ROOT = join(import.meta.dir, "../..");
const SHOTS = join(ROOT, "test-artifacts/screenshots");
const ADMIN_PASSWORD = "the operator's admin password";
const axeSource = await Bun.file(require.resolve("axe-core/axe.min.js")).text();

// Screenshots are artifacts (test-artifacts/ is in .gitignore).
mkdirSync(SHOTS, { recursive: true });

let t: TestApp;
let mock: MockProviderServer;
let browser: Browser;
let user: TestUser;
let admin: TestUser;
let sessionId: string;
let workspaceId: string;
let playbookId: string;

/** Console errors, page errors and CSP violations of a page; an expected 4xx resource load may be allowed. */
function watch(page: Page, allow: RegExp[] = []) {
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    const text = m.text();
    if (/Refused to/.test(text)) problems.push(`CSP: ${text}`);
    else if (m.type() === "error" && !allow.some((r) => r.test(text))) problems.push(`console: ${text}`);
  });
  return problems;
}

async function signedInContext(u: TestUser | null, opts: { dark?: boolean; phone?: boolean } = {}): Promise<BrowserContext> {
  const ctx = await browser.newContext({
    viewport: opts.phone ? { width: 390, height: 844 } : { width: 1280, height: 800 },
    colorScheme: opts.dark ? "dark" : "light",
    isMobile: false,
  });
  if (u) {
    const [name, value] = u.cookie.split("=") as [string, string];
    await ctx.addCookies([{ name, value, url: t.url }]);
  }
  return ctx;
}

interface AxeResult {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; failureSummary?: string }[];
}

/** Runs axe-core on the page: returns the serious and critical violations, prints the others. */
async function axe(page: Page, label: string): Promise<string[]> {
  await page.evaluate(axeSource);
  const violations = (await page.evaluate(async () => {
    const w = window as unknown as { axe: { run: (ctx: Document, opts: object) => Promise<{ violations: unknown[] }> } };
    const r = await w.axe.run(document, { resultTypes: ["violations"] });
    return r.violations;
  })) as AxeResult[];
  const bad: string[] = [];
  for (const v of violations) {
    const where = v.nodes.map((n) => `${n.target.join(" ")}${n.failureSummary ? ` (${n.failureSummary.replace(/\s+/g, " ")})` : ""}`).join("; ");
    const line = `[${label}] ${v.impact} ${v.id}: ${v.help} — ${where}`;
    if (v.impact === "serious" || v.impact === "critical") bad.push(line);
    else console.log(`axe (not serious): ${line}`);
  }
  return bad;
}

/** In the page: the elements sticking out past the viewport's right edge that no scrolling box clips. */
function overflowing(): string[] {
  const width = document.documentElement.clientWidth;
  // A scroll box clips a descendant, unless that one is absolutely positioned and the box is not its containing block.
  const clipped = (e: Element) => {
    const absolute = /absolute|fixed/.test(getComputedStyle(e).position);
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      const st = getComputedStyle(a);
      if (st.overflowX !== "visible" && (!absolute || st.position !== "static")) return true;
    }
    return false;
  };
  const name = (e: Element) => `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ""}${typeof e.className === "string" && e.className ? `.${e.className.trim().replace(/\s+/g, ".")}` : ""}`;
  const wide = new Set(Array.from(document.querySelectorAll("body *")).filter((e) => e.getBoundingClientRect().right > width + 0.5 && !clipped(e)));
  return [...wide]
    .filter((e) => !wide.has(e.parentElement!))
    .slice(0, 8)
    .map((e) => `${name(e)} (${Math.round(e.getBoundingClientRect().left)}–${Math.round(e.getBoundingClientRect().right)} px)`);
}

interface View {
  name: string;
  who: "anonymous" | "user" | "admin";
  path: () => string;
  /** Waits until the view has its content. */
  ready: (page: Page) => Promise<unknown>;
  /** Expected 4xx resource loads this view provokes. */
  allow?: RegExp[];
}

const VIEWS: View[] = [
  { name: "signin", who: "anonymous", path: () => "/", ready: (p) => p.waitForSelector("form input[name=password]") },
  { name: "setup", who: "anonymous", path: () => "/setup#a-setup-token-from-the-server-log", ready: (p) => p.waitForSelector("input[name=password][autocomplete=new-password]") },
  { name: "setup-missing", who: "anonymous", path: () => "/setup", ready: (p) => p.waitForSelector("#missing") },
  { name: "docs", who: "anonymous", path: () => "/docs", ready: (p) => p.waitForSelector("details summary code") },
  { name: "chat-new", who: "user", path: () => "/", ready: (p) => p.waitForSelector(".composer textarea") },
  {
    name: "chat-session",
    who: "user",
    path: () => `/sessions/${sessionId}`,
    ready: async (p) => {
      await p.waitForSelector(".msg.agent :text('The file is written.')");
      await p.waitForSelector(".sessions .list a[aria-current=page]");
    },
  },
  { name: "profiles", who: "user", path: () => "/profiles", ready: (p) => p.waitForSelector("table td:has-text('test anthropic')") },
  {
    // The edit form with a row of every list (env, a stdio and an http MCP server, a header, a
    // repository) and a server error next to an MCP server's URL (nothing is saved).
    name: "profile-edit",
    who: "user",
    path: () => "/profiles",
    allow: [/^Failed to load resource: the server responded with a status of 400\b/],
    ready: async (p) => {
      await p.click("button[aria-label='Edit test anthropic']");
      await p.click("button:has-text('Add variable')");
      await p.getByLabel("Name of variable 1", { exact: true }).fill("LOG_LEVEL");
      await p.click("button:has-text('Add MCP server')");
      await p.click("button:has-text('Add MCP server')");
      const stdio = p.getByRole("group", { name: "MCP server 1", exact: true });
      await stdio.getByLabel("Name", { exact: true }).fill("files");
      await stdio.getByLabel("Command", { exact: true }).fill("npx");
      const http = p.getByRole("group", { name: "MCP server 2", exact: true });
      await http.getByLabel("Name", { exact: true }).fill("tracker");
      await http.getByLabel("Transport").selectOption("http");
      await http.getByLabel("URL", { exact: true }).fill("ftp://x");
      await http.getByRole("button", { name: "Add header to MCP server 2" }).click();
      await http.getByLabel("Name of header 1 of MCP server 2", { exact: true }).fill("Authorization");
      await http.getByLabel("Kind of header 1 of MCP server 2").selectOption("secret");
      await http.getByLabel("Secret name of header 1 of MCP server 2", { exact: true }).fill("GITHUB_TOKEN");
      await p.fill("#pf-allowed_tools", "mcp__tracker__*");
      await p.click("button:has-text('Add repository')");
      await p.getByRole("group", { name: "Repository 1", exact: true }).getByLabel("URL", { exact: true }).fill("https://github.com/acme/widgets.git");
      await p.click("button:has-text('Save changes')");
      await p.waitForSelector("[id='pf-mcp_servers[1].url-err']");
    },
  },
  { name: "playbooks", who: "user", path: () => "/playbooks", ready: (p) => p.waitForSelector("table a:has-text('Nightly check')") },
  { name: "playbook-detail", who: "user", path: () => `/playbooks/${playbookId}`, ready: (p) => p.waitForSelector("[data-testid=trigger-url]") },
  { name: "workspaces", who: "user", path: () => "/workspaces", ready: (p) => p.waitForSelector(`table a[href='/workspaces/${workspaceId}']`) },
  { name: "workspace-detail", who: "user", path: () => `/workspaces/${workspaceId}`, ready: (p) => p.waitForSelector("[data-testid=workspace-files] a:has-text('report.txt')", { timeout: 30_000 }) },
  { name: "secrets", who: "user", path: () => "/secrets", ready: (p) => p.waitForSelector("table code:has-text('GITHUB_TOKEN')") },
  { name: "webhook", who: "user", path: () => "/webhook", ready: (p) => p.waitForSelector("[data-testid=deliveries] tbody td:has-text('Build finished')") },
  { name: "usage", who: "user", path: () => "/usage", ready: (p) => p.waitForSelector("svg.chart rect.bar:not([height='0'])") },
  { name: "tokens", who: "user", path: () => "/tokens", ready: (p) => p.waitForSelector("table td:has-text('laptop')") },
  { name: "operator-password", who: "admin", path: () => "/operator", ready: (p) => p.waitForSelector("input[name=password][type=password]") },
  {
    name: "operator",
    who: "admin",
    path: () => "/operator",
    ready: async (p) => {
      await p.fill("input[name=password][type=password]", ADMIN_PASSWORD);
      await p.press("input[name=password][type=password]", "Enter");
      await p.waitForSelector(`td:has-text('${user.email}')`);
      await p.waitForSelector("form select[name=signup]");
    },
  },
];

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  // Any request the queue does not answer gets a short reply (the keyboard test's message).
  mock.script(() => ({ text: "Hello from the mock model.", usage: { input_tokens: 30, output_tokens: 6 } }));
  browser = await launchBrowser();
  user = await createUser(t);
  admin = await createUser(t, { role: "admin" });
  await t.app.services.adminPassword.set(ADMIN_PASSWORD);

  // Content for every view: a profile, a session whose agent wrote a file (its workspace), a
  // playbook with a schedule, a secret, a webhook and a notification, a second token.
  const profileId = await createProfile(t, user, { mock, tools: ["Bash", "Read", "Write", "Edit"] });
  mock.enqueue(
    { text: "Writing the report.", toolCalls: [{ name: "Write", input: { file_path: "report.txt", content: "all good\n" } }], usage: { input_tokens: 1200, output_tokens: 300 } },
    { text: "The file is written.\n\n| file | state |\n|---|---|\n| report.txt | written |", usage: { input_tokens: 1500, output_tokens: 120 } },
  );
  const task = await submit(t, user, { profile_id: profileId, prompt: "Write a report to report.txt" });
  sessionId = task.session_id;
  expect((await waitTask(t, user, task.task_id)).status).toBe("completed");
  const ws = await api(t, "GET", "/v1/workspaces", user.bearer);
  workspaceId = ws.body.data[0].id;

  const pb = await api(t, "POST", "/v1/playbooks", user.bearer, { name: "Nightly check", profile_id: profileId, prompt: "Check the build", schedule: "0 3 * * *", timezone: "UTC" });
  expect(pb.status, JSON.stringify(pb.body)).toBe(201);
  playbookId = pb.body.id;
  expect((await api(t, "PUT", "/v1/secrets/GITHUB_TOKEN", user.bearer, { value: "ghp_not_a_real_token" })).status).toBeLessThan(300);
  expect((await api(t, "POST", "/v1/api-tokens", user.bearer, { name: "laptop" })).status).toBe(201);
  // A receiver that refuses: the delivery fails (and is marked so) without waiting for retries.
  const receiver = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("no", { status: 400 }) });
  const hook = await api(t, "POST", "/v1/integrations", user.bearer, { type: "webhook", config: { url: `http://127.0.0.1:${receiver.port}/hook` } });
  expect(hook.status, JSON.stringify(hook.body)).toBe(201);
  expect((await api(t, "POST", "/v1/notifications", user.bearer, { message: "Build finished" })).status).toBe(202);
  receiver.stop(true);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await mock?.stop();
  await t?.stop();
});

describe("every view", () => {
  for (const view of VIEWS) {
    test(`${view.name}: axe clean in light and dark, fits 390 px, screenshots`, async () => {
      const who = view.who === "anonymous" ? null : view.who === "admin" ? admin : user;
      const failures: string[] = [];
      for (const mode of ["light", "dark", "phone"] as const) {
        const ctx = await signedInContext(who, { dark: mode === "dark", phone: mode === "phone" });
        const page = await ctx.newPage();
        const problems = watch(page, view.allow);
        try {
          await page.goto(t.url + view.path());
          await view.ready(page);
          // Let late requests and the frame after them settle.
          await page.waitForLoadState("networkidle");
          if (mode !== "phone") failures.push(...(await axe(page, `${view.name} ${mode}`)));
          else {
            const { scroll, client } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
            if (scroll > 390) {
              const wide = await page.evaluate(overflowing);
              failures.push(`[${view.name} phone] the page is ${scroll} px wide at a ${client} px viewport: ${wide.join(", ")}`);
            }
          }
          await page.screenshot({ path: join(SHOTS, `${view.name}-${mode}.png`), fullPage: true });
          failures.push(...problems.map((p) => `[${view.name} ${mode}] ${p}`));
        } finally {
          await ctx.close();
        }
      }
      expect(failures).toEqual([]);
    }, 90_000);
  }
});

test("keyboard: the composer has the focus when the page opens and keeps it through the new session's first answer; Enter sends; the skip link leads to the content", async () => {
  const ctx = await signedInContext(user);
  const page = await ctx.newPage();
  const problems = watch(page);
  const focused = () => page.evaluate(() => (document.activeElement as HTMLElement | null)?.matches(".composer textarea") ?? false);
  try {
    await page.goto(t.url + "/");
    await page.waitForSelector(".composer textarea");
    await page.waitForFunction(() => document.activeElement?.matches(".composer textarea"));
    await page.keyboard.type("Hello from the keyboard");
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/sessions\/sess_/);
    await page.waitForSelector(".msg.user:has-text('Hello from the keyboard')");
    await page.waitForSelector(".msg.agent:has-text('Hello from the mock model.')", { timeout: 30_000 });
    // The session's page opened with the focus in its composer (not on <body>), which is cleared.
    expect(await focused()).toBe(true);
    expect(await page.inputValue(".composer textarea")).toBe("");
    // The first Tab stop of the page is the skip link; it moves the focus to the content.
    expect(await page.evaluate(() => document.querySelector("a[href], button, input, select, textarea")?.textContent)).toBe("Skip to content");
    await page.focus(".skip");
    expect(await page.evaluate(() => getComputedStyle(document.activeElement!).left)).not.toStartWith("-");
    await page.keyboard.press("Enter");
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe("MAIN");
    expect(problems).toEqual([]);
  } finally {
    await ctx.close();
  }
}, 60_000);
