/**
 * The dashboard's resource views in real Chromium, each driven as a user would: API tokens (shown
 * once, copy, revoke), secrets (names only, replace, delete), the webhook (a signed test delivery
 * to a local receiver, a failing one marked), profiles (the full form, a server field error next
 * to its field; MCP servers, allowed tools and repositories saved and shown again, an MCP URL's
 * error next to it), playbooks (cron preview, run now, runs with their sessions, trigger URL
 * rotated), usage (the chart and totals after a task), workspaces (a file the agent wrote,
 * downloaded) and the Admin view (absent for a user; for an admin, opened with the admin
 * password). Any console error, page error or CSP violation fails the test (expected 4xx loads
 * the test provokes aside).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { createProfile, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser } from "../helpers/browser.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import type { MockProviderServer, RecordedRequest } from "../helpers/mock-provider.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

const ADMIN_PASSWORD = "the operator's admin password";
/** Chrome logs an HTTP error answer to fetch() as a console error; the tests allow the ones they provoke. */
const failedLoad = (status: number) => new RegExp(`^Failed to load resource: the server responded with a status of ${status}\\b`);

let t: TestApp;
let mock: MockProviderServer;
let browser: Browser;

/** The mock model: a prompt containing WRITE_FILE first writes notes/hello.txt; every turn ends with a short answer. */
function answer(req: RecordedRequest) {
  const msgs = req.body.messages as { role: string; content: string | { type: string; text?: string }[] }[];
  const text = (c: (typeof msgs)[number]["content"]) => (typeof c === "string" ? c : c.map((b) => b.text ?? "").join(""));
  const last = msgs[msgs.length - 1]!;
  const afterTool = Array.isArray(last.content) && last.content.some((b) => b.type === "tool_result");
  if (text(msgs[0]!.content).includes("WRITE_FILE") && !afterTool)
    return { text: "Writing it.", toolCalls: [{ name: "Write", input: { file_path: "notes/hello.txt", content: "hello from the agent\n" } }], usage: { input_tokens: 1000, output_tokens: 100 } };
  return { text: "All done: the build is green.", usage: { input_tokens: 1000, output_tokens: 200 } };
}

interface Opened {
  ctx: BrowserContext;
  page: Page;
  problems: string[];
  close(): Promise<void>;
}

/**
 * A field error the server answered, shown by the form: the message next to the field (id `<id>-err`),
 * the field marked invalid and described by it, and the focus on the field.
 */
async function expectFieldError(page: Page, id: string, text: string) {
  const err = page.locator(`[id='${id}-err']`);
  await err.waitFor();
  expect(await err.textContent()).toContain(text);
  const input = page.locator(`[id='${id}']`);
  expect(await input.getAttribute("aria-invalid")).toBe("true");
  expect(await input.getAttribute("aria-describedby")).toContain(`${id}-err`);
  // The focus moves in an effect after the render that shows the message: waited for, not raced
  // (it failed once under CI load with the message shown and the focus not moved yet).
  await page.waitForFunction((want) => document.activeElement?.id === want, id, { timeout: 5000 }).catch(() => undefined);
  expect(await page.evaluate(() => document.activeElement?.id)).toBe(id);
  return err;
}

/** A fresh browser context signed in as `u` (its cookie), in UTC and en-US, clipboard allowed, confirm() accepted. */
async function open(u: TestUser, allow: RegExp[] = []): Promise<Opened> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: "UTC", locale: "en-US" });
  await ctx.grantPermissions(["clipboard-read", "clipboard-write"], { origin: t.url });
  const [name, value] = u.cookie.split("=") as [string, string];
  await ctx.addCookies([{ name, value, url: t.url }]);
  const page = await ctx.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    const text = m.text();
    if (/Refused to/.test(text)) problems.push(`CSP: ${text}`);
    else if (m.type() === "error" && !allow.some((r) => r.test(text))) problems.push(`console: ${text}`);
  });
  page.on("dialog", (d) => void d.accept());
  return { ctx, page, problems, close: () => ctx.close() };
}

const clipboard = (page: Page) => page.evaluate(() => navigator.clipboard.readText());

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic().script(answer);
  browser = await launchBrowser();
  await t.app.services.adminPassword.set(ADMIN_PASSWORD);
});

afterAll(async () => {
  await browser?.close();
  await mock?.stop();
  await t?.stop();
});

describe("/tokens", () => {
  test("a new token is shown once with a copy button, listed, and revoked", async () => {
    const user = await createUser(t);
    const { page, problems, close } = await open(user, [failedLoad(401)]);
    try {
      await page.goto(`${t.url}/tokens`);
      await page.fill("input[name=name]", "ci-runner");
      await page.click("button:has-text('Create API token')");
      const shown = page.locator("[data-testid=new-token]");
      await shown.waitFor();
      const token = (await shown.textContent())!.trim();
      expect(token).toMatch(/^rc_[0-9a-f]{64}$/);
      // Copy puts exactly the token on the clipboard.
      await page.locator(".notice button:has-text('Copy')").click();
      await page.locator(".notice button:text-is('Copied')").waitFor();
      expect(await clipboard(page)).toBe(token);
      // The token works, and the list shows it.
      expect((await api(t, "GET", "/v1/me", { authorization: `Bearer ${token}` })).status).toBe(200);
      await page.waitForSelector("table tr:has(td:text-is('ci-runner'))");

      // Shown once: after a reload the list still has it, the value is gone from the page.
      await page.reload();
      await page.waitForSelector("table tr:has(td:text-is('ci-runner'))");
      expect(await page.locator("[data-testid=new-token]").count()).toBe(0);
      expect(await page.content()).not.toContain(token);
      expect(await page.locator("table tbody tr").count()).toBe(2); // the helper's "test" token and this one

      // Revoke: the row goes, the token stops working.
      await page.click("table tr:has(td:text-is('ci-runner')) button:has-text('Revoke')");
      await page.waitForSelector("table tr:has(td:text-is('ci-runner'))", { state: "detached" });
      expect((await api(t, "GET", "/v1/me", { authorization: `Bearer ${token}` })).status).toBe(401);
      expect(await page.locator("table tr:has(td:text-is('test'))").count()).toBe(1);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});

describe("/secrets", () => {
  test("a secret is set and shown by name only, then replaced and deleted", async () => {
    const user = await createUser(t);
    const value = async (name: string) => (await t.app.services.secrets.resolveEnv(user.id, { V: { secret: name } })).V;
    const { page, problems, close } = await open(user);
    try {
      await page.goto(`${t.url}/secrets`);
      await page.waitForSelector("td:has-text('No secrets yet.')");
      await page.fill("form input[name=name]", "DEPLOY_KEY");
      await page.fill("form input[name=value]", "first-value-4f1c");
      await page.click("button:has-text('Save secret')");
      await page.waitForSelector("[role=status]:has-text('Saved DEPLOY_KEY.')");
      await page.waitForSelector("table code:text-is('DEPLOY_KEY')");
      expect(await value("DEPLOY_KEY")).toBe("first-value-4f1c");
      // Names only: the value is neither on the page nor in the form any more.
      expect(await page.content()).not.toContain("first-value-4f1c");
      expect(await page.inputValue("form input[name=value]")).toBe("");

      // Replace: the name is fixed, the new value replaces the old one, still one row.
      await page.click("button[aria-label='Replace the value of DEPLOY_KEY']");
      await page.waitForSelector("h2:has-text('Replace the value of DEPLOY_KEY')");
      expect(await page.inputValue("form input[name=name]")).toBe("DEPLOY_KEY");
      expect(await page.getAttribute("form input[name=name]", "readonly")).not.toBeNull();
      // The value field has the focus, ready to type.
      expect(await page.evaluate(() => (document.activeElement as HTMLInputElement | null)?.name)).toBe("value");
      await page.fill("form input[name=value]", "second-value-9a2e");
      await page.click("button:has-text('Replace value')");
      await page.waitForSelector("[role=status]:has-text('Saved DEPLOY_KEY.')");
      await page.waitForSelector("h2:has-text('Set a secret')");
      expect(await value("DEPLOY_KEY")).toBe("second-value-9a2e");
      expect(await page.locator("table tbody tr").count()).toBe(1);
      expect(await page.content()).not.toContain("second-value-9a2e");

      // Delete.
      await page.click("button[aria-label='Delete DEPLOY_KEY']");
      await page.waitForSelector("[role=status]:has-text('Deleted DEPLOY_KEY.')");
      await page.waitForSelector("td:has-text('No secrets yet.')");
      expect((await api(t, "GET", "/v1/secrets", user.bearer)).body.data).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});

describe("/secrets, multi-line", () => {
  test("ticking Multi-line keeps the value already typed", async () => {
    const user = await createUser(t);
    const { page, problems, close } = await open(user);
    try {
      await page.goto(`${t.url}/secrets`);
      await page.waitForSelector("td:has-text('No secrets yet.')");
      await page.fill("form input[name=name]", "PEM_KEY");
      await page.fill("form input[name=value]", "-----BEGIN KEY-----");
      await page.getByLabel("Multi-line").check();
      expect(await page.inputValue("form textarea[name=value]")).toBe("-----BEGIN KEY-----");
      await page.locator("form textarea[name=value]").press("End");
      await page.locator("form textarea[name=value]").pressSequentially("\nabc\n-----END KEY-----");
      await page.click("button:has-text('Save secret')");
      await page.waitForSelector("[role=status]:has-text('Saved PEM_KEY.')");
      expect((await t.app.services.secrets.resolveEnv(user.id, { V: { secret: "PEM_KEY" } })).V).toBe("-----BEGIN KEY-----\nabc\n-----END KEY-----");
      expect(await page.inputValue("form textarea[name=value]")).toBe("");
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});

describe("/webhook", () => {
  test("a test delivery reaches the local receiver signed and shows as delivered; a failing one is marked failed", async () => {
    const user = await createUser(t);
    const received: { headers: Headers; body: string }[] = [];
    const good = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        received.push({ headers: req.headers, body: await req.text() });
        return new Response("ok");
      },
    });
    // 4xx other than 408/429: failed at once, no retries to wait for.
    const bad = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("gone", { status: 410 }) });
    const { page, problems, close } = await open(user);
    try {
      await page.goto(`${t.url}/webhook`);
      await page.waitForSelector("h2:has-text('Set up a webhook')");
      await page.fill("input[name=url]", `http://127.0.0.1:${good.port}/hooks/runcell`);
      expect(await page.isChecked("input[name=sign]")).toBe(true);
      await page.click("button:has-text('Create webhook')");
      const secretEl = page.locator("[data-testid=webhook-secret]");
      await secretEl.waitFor();
      const secret = (await secretEl.textContent())!.trim();
      expect(secret).toMatch(/^whsec_[0-9a-f]{64}$/);
      await page.waitForSelector("h2:has-text('Your webhook')");
      await page.waitForSelector("p.meta:has-text('Signed deliveries')");

      await page.fill("input[name=message]", "Hello from the webhook test");
      await page.click("button:has-text('Send test notification')");
      await page.waitForSelector("[role=status]:has-text('queued')");
      // The receiver gets it, signed with the secret shown once.
      for (let i = 0; i < 200 && received.length === 0; i++) await Bun.sleep(50);
      expect(received.length).toBe(1);
      const r = received[0]!;
      expect(JSON.parse(r.body).message).toBe("Hello from the webhook test");
      const sig = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(r.headers.get("x-service-signature") ?? "");
      expect(sig).not.toBeNull();
      expect(sig![2]).toBe(createHmac("sha256", secret).update(`${sig![1]}.${r.body}`).digest("hex"));
      const delivery = r.headers.get("x-service-delivery");
      expect(delivery).toMatch(/^ntf_/);

      // The log shows it delivered (the view follows pending rows by itself).
      const row = page.locator("[data-testid=deliveries] tbody tr", { hasText: "Hello from the webhook test" });
      await row.locator("td").first().filter({ hasText: /^delivered$/ }).waitFor({ timeout: 15_000 });
      expect(await row.locator("td").nth(2).textContent()).toBe("1");
      expect((await row.locator("td").first().getAttribute("class")) ?? "").not.toContain("error");

      // Point it at a receiver that refuses: the delivery is marked failed, with its error.
      await page.fill("input[name=url]", `http://127.0.0.1:${bad.port}/gone`);
      await page.click("button:has-text('Save webhook')");
      await page.waitForSelector("[role=status]:has-text('Webhook saved')");
      await page.fill("input[name=message]", "This one bounces");
      await page.click("button:has-text('Send test notification')");
      const failed = page.locator("[data-testid=deliveries] tbody tr", { hasText: "This one bounces" });
      const status = failed.locator("td").first();
      await status.filter({ hasText: /^failed$/ }).waitFor({ timeout: 15_000 });
      expect(await status.getAttribute("class")).toContain("error");
      expect(await failed.locator("td").nth(3).textContent()).toContain("410");
      expect(received.length).toBe(1);
      expect(problems).toEqual([]);
    } finally {
      await close();
      good.stop(true);
      bad.stop(true);
    }
  }, 60_000);
});

describe("/profiles", () => {
  test("a profile is created and edited with the full form; a server field error shows next to its field", async () => {
    const user = await createUser(t);
    expect((await api(t, "PUT", "/v1/secrets/API_TOKEN", user.bearer, { value: "tok-123" })).status).toBeLessThan(300);
    const { page, problems, close } = await open(user, [failedLoad(400)]);
    try {
      await page.goto(`${t.url}/profiles`);
      await page.waitForSelector("td:has-text('No profiles yet.')");
      await page.waitForSelector("#pf-secrets option[value=API_TOKEN]", { state: "attached" });
      await page.fill("#pf-name", "Builder");
      await page.fill("#pf-image", t.config.workspaceImage);
      await page.selectOption("#pf-network", "none");
      await page.fill("#pf-system_prompt", "You build things.");
      await page.selectOption("[id='pf-model.provider']", "anthropic");
      await page.fill("[id='pf-model.name']", "claude-sonnet-4-6");
      await page.fill("[id='pf-model.base_url']", mock.url);
      await page.fill("[id='pf-model.pricing.input_per_mtok']", "3");
      await page.fill("[id='pf-model.pricing.output_per_mtok']", "15");
      // Tools: drop Edit and Notify.
      await page.uncheck("fieldset:has(legend:text-is('Tools the agent may use')) label:has-text('Edit') input");
      await page.uncheck("fieldset:has(legend:text-is('Tools the agent may use')) label:has-text('Notify') input");
      // Env: a literal value and one from the vault.
      await page.click("button:has-text('Add variable')");
      await page.click("button:has-text('Add variable')");
      const rows = page.locator(".env-row");
      await rows.nth(0).getByLabel("Name of variable 1").fill("GREETING");
      await rows.nth(0).getByLabel("Value of variable 1").fill("hello");
      await rows.nth(1).getByLabel("Name of variable 2").fill("TOKEN");
      await rows.nth(1).getByLabel("Kind of variable 2").selectOption("secret");
      await rows.nth(1).getByLabel("Secret name of variable 2").fill("API_TOKEN");
      const limits = { max_turns: "12", max_budget_usd: "2.5", max_concurrency: "3", memory_mb: "512", cpus: "0.5", pids: "256" };
      for (const [k, v] of Object.entries(limits)) await page.fill(`[id='pf-limits.${k}']`, v);
      await page.click("button:has-text('Create profile')");
      await page.waitForSelector("[role=status]:has-text('Created the profile Builder.')");
      await page.waitForSelector("table tr:has(td:text-is('Builder'))");

      const list = (await api(t, "GET", "/v1/profiles", user.bearer)).body.data;
      expect(list.length).toBe(1);
      const p = list[0];
      expect(p).toMatchObject({
        name: "Builder",
        system_prompt: "You build things.",
        image: t.config.workspaceImage,
        network: "none",
        model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url, pricing: { input_per_mtok: 3, output_per_mtok: 15 } },
        tools: ["Bash", "Read", "Write", "AskUserQuestion"],
        env: { GREETING: "hello", TOKEN: { secret: "API_TOKEN" } },
        limits: { max_turns: 12, max_budget_usd: 2.5, max_concurrency: 3, memory_mb: 512, cpus: 0.5, pids: 256 },
      });
      // The form is empty again for the next profile.
      expect(await page.inputValue("#pf-name")).toBe("");

      // Edit: the form holds the saved values; a change is saved.
      await page.click("button[aria-label='Edit Builder']");
      await page.waitForSelector("#pf-title:has-text('Edit Builder')");
      expect(await page.inputValue("[id='pf-limits.memory_mb']")).toBe("512");
      expect(await page.inputValue("[id='pf-model.base_url']")).toBe(mock.url);
      expect(await page.locator(".env-row").count()).toBe(2);
      expect(await page.evaluate(() => document.activeElement?.id)).toBe("pf-name");
      await page.fill("#pf-name", "Builder 2");
      await page.fill("[id='pf-limits.max_turns']", "20");
      await page.check("fieldset:has(legend:text-is('Tools the agent may use')) label:has-text('Notify') input");
      await page.click("button:has-text('Save changes')");
      await page.waitForSelector("[role=status]:has-text('Saved the profile Builder 2.')");
      await page.waitForSelector("table tr:has(td:text-is('Builder 2'))");
      const edited = (await api(t, "GET", `/v1/profiles/${p.id}`, user.bearer)).body;
      expect(edited.limits.max_turns).toBe(20);
      expect(edited.limits.memory_mb).toBe(512);
      expect(edited.tools).toEqual(["Bash", "Read", "Write", "AskUserQuestion", "Notify"]);
      expect(edited.env).toEqual({ GREETING: "hello", TOKEN: { secret: "API_TOKEN" } });

      // A base_url the server refuses: its message is shown next to that field, which gets the focus.
      await page.click("button[aria-label='Edit Builder 2']");
      await page.waitForSelector("#pf-title:has-text('Edit Builder 2')");
      await page.fill("[id='pf-model.base_url']", "https://someone:hunter2@models.example.com/v1");
      await page.click("button:has-text('Save changes')");
      const err = await expectFieldError(page, "pf-model.base_url", "credentials");
      // The error sits in the same field block as the input, right after its label.
      expect(await err.evaluate((e) => e.previousElementSibling?.contains(document.getElementById("pf-model.base_url")) ?? false)).toBe(true);
      // Nothing was saved.
      expect((await api(t, "GET", `/v1/profiles/${p.id}`, user.bearer)).body.model.base_url).toBe(mock.url);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  }, 60_000);

  test("MCP servers (a header from the vault), allowed tools and a repository are saved and shown again after a reload; an invalid MCP URL's error shows next to it", async () => {
    const user = await createUser(t);
    for (const name of ["MCP_TOKEN", "GIT_TOKEN"]) expect((await api(t, "PUT", `/v1/secrets/${name}`, user.bearer, { value: "not-a-real-token" })).status).toBeLessThan(300);
    const id = await createProfile(t, user, { mock });
    const mcpUrl = "http://127.0.0.1:9/mcp"; // a host the test server allows (--allow-model-hosts); nothing connects on save
    const repoUrl = "https://127.0.0.1/acme/widgets.git";
    const { page, problems, close } = await open(user, [failedLoad(400)]);
    const server = (n: number) => page.getByRole("group", { name: `MCP server ${n}`, exact: true });
    const repo = page.getByRole("group", { name: "Repository 1", exact: true });
    const edit = async () => {
      await page.click("button[aria-label='Edit test anthropic']");
      await page.waitForSelector("#pf-title:has-text('Edit test anthropic')");
    };
    try {
      await page.goto(`${t.url}/profiles`);
      await page.waitForSelector("#pf-secrets option[value=MCP_TOKEN]", { state: "attached" });
      await edit();
      // An http server whose Authorization header comes from the vault.
      await page.click("button:has-text('Add MCP server')");
      await server(1).getByLabel("Name", { exact: true }).fill("tracker");
      await server(1).getByLabel("Transport").selectOption("http");
      await server(1).getByLabel("URL", { exact: true }).fill(mcpUrl);
      await server(1).getByLabel("Timeout per call (ms)").fill("30000");
      await server(1).getByRole("button", { name: "Add header to MCP server 1" }).click();
      await server(1).getByLabel("Name of header 1 of MCP server 1", { exact: true }).fill("Authorization");
      await server(1).getByLabel("Kind of header 1 of MCP server 1").selectOption("secret");
      await server(1).getByLabel("Secret name of header 1 of MCP server 1", { exact: true }).fill("MCP_TOKEN");
      // A stdio server: its arguments one per line.
      await page.click("button:has-text('Add MCP server')");
      await server(2).getByLabel("Name", { exact: true }).fill("files");
      await server(2).getByLabel("Command", { exact: true }).fill("npx");
      await server(2).getByLabel("Arguments (one per line)").fill("-y\n@modelcontextprotocol/server-filesystem\n\n/workspace");
      await page.fill("#pf-allowed_tools", "mcp__tracker__*, !mcp__tracker__delete_* mcp__files__read_file");
      await page.getByLabel("Docker host labels").fill("ssd, region=eu");
      await page.click("button:has-text('Add repository')");
      await repo.getByLabel("URL", { exact: true }).fill(repoUrl);
      await repo.getByLabel("Branch, tag or commit").fill("main");
      await repo.getByLabel("Directory under /workspace").fill("widgets");
      await repo.getByLabel("Credential secret").fill("GIT_TOKEN");
      await repo.getByLabel("History depth (0: full)").fill("0");
      await page.click("button:has-text('Save changes')");
      await page.waitForSelector("[role=status]:has-text('Saved the profile test anthropic.')");
      const saved = (await api(t, "GET", `/v1/profiles/${id}`, user.bearer)).body;
      expect(saved.mcp_servers).toEqual([
        { name: "tracker", transport: "http", url: mcpUrl, headers: { Authorization: { secret: "MCP_TOKEN" } }, timeout_ms: 30_000 },
        { name: "files", transport: "stdio", command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "/workspace"] },
      ]);
      expect(saved.allowed_tools).toEqual(["mcp__tracker__*", "!mcp__tracker__delete_*", "mcp__files__read_file"]);
      expect(saved.repositories).toEqual([{ url: repoUrl, ref: "main", path: "widgets", credential_secret: "GIT_TOKEN", depth: 0 }]);
      expect(saved.host_labels).toEqual(["ssd", "region=eu"]);

      // After a reload the form holds them again, and saving it unchanged sends nothing.
      await page.reload();
      await edit();
      expect(await server(1).getByLabel("Name", { exact: true }).inputValue()).toBe("tracker");
      expect(await server(1).getByLabel("Transport").inputValue()).toBe("http");
      expect(await server(1).getByLabel("URL", { exact: true }).inputValue()).toBe(mcpUrl);
      expect(await server(1).getByLabel("Name of header 1 of MCP server 1", { exact: true }).inputValue()).toBe("Authorization");
      expect(await server(1).getByLabel("Kind of header 1 of MCP server 1").inputValue()).toBe("secret");
      expect(await server(1).getByLabel("Secret name of header 1 of MCP server 1", { exact: true }).inputValue()).toBe("MCP_TOKEN");
      expect(await server(2).getByLabel("Transport").inputValue()).toBe("stdio");
      expect(await server(2).getByLabel("Arguments (one per line)").inputValue()).toBe("-y\n@modelcontextprotocol/server-filesystem\n/workspace");
      expect(await page.inputValue("#pf-allowed_tools")).toBe("mcp__tracker__*, !mcp__tracker__delete_*, mcp__files__read_file");
      expect(await page.getByLabel("Docker host labels").inputValue()).toBe("ssd, region=eu");
      expect(await repo.getByLabel("URL", { exact: true }).inputValue()).toBe(repoUrl);
      expect(await repo.getByLabel("Credential secret").inputValue()).toBe("GIT_TOKEN");
      expect(await repo.getByLabel("History depth (0: full)").inputValue()).toBe("0");
      await page.click("button:has-text('Save changes')");
      await page.waitForSelector("form [role=status]:has-text('No changes to save.')");

      // A URL the server refuses (not http or https): its message is shown next to that server's URL, which gets the focus.
      await server(1).getByLabel("URL", { exact: true }).fill("ftp://x");
      await page.click("button:has-text('Save changes')");
      await expectFieldError(page, "pf-mcp_servers[0].url", "mcp_servers[0].url must use http or https");
      expect((await api(t, "GET", `/v1/profiles/${id}`, user.bearer)).body.mcp_servers[0].url).toBe(mcpUrl);

      // Removing the stdio server and the repository replaces both lists as a whole.
      await server(1).getByLabel("URL", { exact: true }).fill(mcpUrl);
      await page.click("button[aria-label='Remove MCP server 2 (files)']");
      await page.click("button[aria-label='Remove repository 1']");
      await page.click("button:has-text('Save changes')");
      await page.waitForSelector("[role=status]:has-text('Saved the profile test anthropic.')");
      const after = (await api(t, "GET", `/v1/profiles/${id}`, user.bearer)).body;
      expect(after.mcp_servers.map((s: { name: string }) => s.name)).toEqual(["tracker"]);
      expect(after.repositories).toEqual([]);
      expect(after.allowed_tools).toEqual(saved.allowed_tools);
      expect(after.host_labels).toEqual(["ssd", "region=eu"]);
      // A label the server refuses is shown next to the field.
      await edit();
      await page.getByLabel("Docker host labels").fill("=bad");
      await page.click("button:has-text('Save changes')");
      await expectFieldError(page, "pf-host_labels", "host_labels");
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  }, 60_000);
});

describe("/playbooks", () => {
  test("a scheduled playbook previews its next five runs, runs now, lists the run with its session; the trigger URL is rotated", async () => {
    const user = await createUser(t);
    await createProfile(t, user, { mock });
    const { page, problems, close } = await open(user);
    try {
      await page.goto(`${t.url}/playbooks`);
      await page.waitForSelector("td:has-text('No playbooks yet.')");
      await page.fill("#pb-name", "Nightly build check");
      await page.selectOption("#pb-profile_id", { label: "test anthropic" });
      await page.fill("#pb-prompt", "Check the build");
      await page.fill("#pb-timezone", "UTC");
      // A pattern croner refuses: said at once, next to the field.
      await page.fill("#pb-schedule", "every night");
      await page.waitForSelector("#pb-preview.error:has-text('Not a valid cron expression')");
      expect(await page.getAttribute("#pb-schedule", "aria-invalid")).toBe("true");
      await page.fill("#pb-schedule", "0 3 * * *");
      const times = page.locator("#pb-preview li time");
      await expect(times.count()).resolves.toBe(5);
      const slots = await times.evaluateAll((els) => els.map((e) => e.getAttribute("datetime")!));
      for (const [i, s] of slots.entries()) {
        expect(s).toMatch(/T03:00:00\.000Z$/);
        if (i > 0) expect(Date.parse(s) - Date.parse(slots[i - 1]!)).toBe(86_400_000);
      }
      expect(Date.parse(slots[0]!)).toBeGreaterThan(Date.now());
      expect(await times.first().textContent()).toContain("03:00");
      await page.click("button:has-text('Create playbook')");
      await page.waitForURL(/\/playbooks\/pb_/);
      const id = page.url().split("/").pop()!;
      await page.waitForSelector("h1:has-text('Nightly build check')");
      await page.waitForSelector("dd:has-text('0 3 * * *')");

      // The trigger URL, with a copy button.
      const trigger = page.locator("[data-testid=trigger-url]");
      const url1 = (await trigger.textContent())!.trim();
      expect(url1.startsWith(`${t.url}/hooks/playbooks/${id}/`)).toBe(true);
      await page.click("button:has-text('Copy URL')");
      expect(await clipboard(page)).toBe(url1);

      // Run now: the mock model answers; the run shows with its status and a link to its session.
      await page.click("[data-testid=run-now]");
      const started = page.locator("[data-testid=run-session]");
      await started.waitFor();
      const sessionHref = await started.getAttribute("href");
      expect(sessionHref).toMatch(/^\/sessions\/sess_/);
      const runRow = page.locator("section:has(#pb-runs) tbody tr", { has: page.locator("td:nth-child(2):text-is('manual')") });
      await runRow.waitFor();
      // Finished runs show completed (the list refreshes itself while a run is active).
      await runRow.locator("td:nth-child(3)").filter({ hasText: /^completed$/ }).waitFor({ timeout: 30_000 });
      expect(await runRow.locator("td:nth-child(5)").textContent()).toMatch(/^\$\d/);
      expect(await runRow.locator("td:nth-child(6) a").getAttribute("href")).toBe(sessionHref);

      // Rotate: a new URL is shown, the old one is refused, the new one runs the playbook.
      await page.click("button:has-text('Rotate')");
      await page.waitForSelector("[role=status]:has-text('New trigger URL')");
      const url2 = (await trigger.textContent())!.trim();
      expect(url2).not.toBe(url1);
      expect(url2.startsWith(`${t.url}/hooks/playbooks/${id}/`)).toBe(true);
      expect((await fetch(url1, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(404);
      expect((await fetch(url2, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(202);
      await page.click("section:has(#pb-runs) button:has-text('Refresh')");
      await page.locator("section:has(#pb-runs) tbody tr td:nth-child(2)", { hasText: /^hook$/ }).waitFor();
      expect(await page.locator("section:has(#pb-runs) tbody tr").count()).toBe(2);

      // The run's link opens its session with the model's answer.
      await runRow.locator("td:nth-child(6) a").click();
      await page.waitForURL(`${t.url}${sessionHref}`);
      await page.waitForSelector(".msg.agent:has-text('All done: the build is green.')", { timeout: 30_000 });

      // The list shows the playbook with its schedule and last run.
      await page.goto(`${t.url}/playbooks`);
      const listed = page.locator("table tbody tr", { hasText: "Nightly build check" });
      await listed.waitFor();
      expect(await listed.locator("code").textContent()).toBe("0 3 * * *");
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  }, 90_000);
});

describe("/usage", () => {
  test("after a task, the chart has today's bar and the totals show its cost", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock, pricing: { input_per_mtok: 3, output_per_mtok: 15 } });
    const task = await submit(t, user, { profile_id: profileId, prompt: "How is the build?" });
    const done = await waitTask(t, user, task.task_id);
    expect(done.status).toBe("completed");
    expect(done.cost_usd).toBeGreaterThan(0);
    const { page, problems, close } = await open(user);
    try {
      await page.goto(`${t.url}/usage`);
      const cost = page.locator("[data-testid=usage-cost]");
      await cost.waitFor();
      const expected = done.cost_usd < 0.01 ? `$${done.cost_usd.toFixed(4)}` : `$${done.cost_usd.toFixed(2)}`;
      expect(await cost.textContent()).toBe(expected);
      expect(await page.locator(".totals-grid div:has(dt:text-is('Tasks')) dd").textContent()).toBe("1");

      // One bar with a height: today's, titled with the day and the cost.
      const bars = page.locator("svg.chart rect.bar");
      await expect(bars.count()).resolves.toBe(30);
      const drawn = await bars.evaluateAll((els) =>
        els.map((e) => ({ value: Number(e.getAttribute("data-value")), height: (e as SVGRectElement).getBoundingClientRect().height, title: e.querySelector("title")?.textContent ?? "" })),
      );
      const tall = drawn.filter((b) => b.height > 0);
      expect(tall.length).toBe(1);
      expect(tall[0]!.value).toBeCloseTo(done.cost_usd, 10);
      expect(tall[0]!.height).toBeGreaterThan(10);
      expect(tall[0]!.title).toContain(new Date().toISOString().slice(0, 10));
      expect(tall[0]!.title).toContain(expected);
      // The chart's label names the total; the per-profile table has the profile.
      expect(await page.getAttribute("svg.chart", "aria-label")).toContain(expected);
      await page.waitForSelector("table tr:has(td:text-is('test anthropic'))");

      // Other ranges keep the total; 7 days draws 7 bars.
      await page.click("button:has-text('7 days')");
      await page.waitForFunction(() => document.querySelectorAll("svg.chart rect.bar").length === 7);
      expect(await cost.textContent()).toBe(expected);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});

describe("/workspaces", () => {
  test("the session's workspace is listed and the file browser downloads a file the agent wrote", async () => {
    const user = await createUser(t);
    const profileId = await createProfile(t, user, { mock });
    const task = await submit(t, user, { profile_id: profileId, prompt: "WRITE_FILE please" });
    expect((await waitTask(t, user, task.task_id)).status).toBe("completed");
    const ws = (await api(t, "GET", "/v1/workspaces", user.bearer)).body.data;
    expect(ws.length).toBe(1);
    const { page, problems, close } = await open(user);
    try {
      await page.goto(`${t.url}/workspaces`);
      const row = page.locator("table tbody tr", { has: page.locator(`a[href='/workspaces/${ws[0].id}']`) });
      await row.waitFor();
      expect(await row.locator(`a[href='/sessions/${task.session_id}']`).count()).toBe(1);
      expect(await row.locator(".ws-status").textContent()).toBe(ws[0].status);
      expect(await row.locator("td:nth-child(3)").textContent()).toBe("test anthropic");

      await row.locator(`a[href='/workspaces/${ws[0].id}']`).click();
      await page.waitForURL(`${t.url}/workspaces/${ws[0].id}`);
      const files = page.locator("[data-testid=workspace-files]");
      await files.locator("a:text-is('notes/')").click({ timeout: 30_000 });
      await page.waitForSelector(".ws-crumbs [aria-current=location]:text-is('notes')");
      // The folder is in the URL: Back returns to /workspace, Forward to the folder, a link opens it.
      expect(page.url()).toBe(`${t.url}/workspaces/${ws[0].id}?path=notes`);
      await files.locator("a:text-is('hello.txt')").waitFor();
      await page.goBack();
      await files.locator("a:text-is('notes/')").waitFor();
      expect(page.url()).toBe(`${t.url}/workspaces/${ws[0].id}`);
      await page.goForward();
      await page.waitForSelector(".ws-crumbs [aria-current=location]:text-is('notes')");
      await page.reload();
      await page.waitForSelector(".ws-crumbs [aria-current=location]:text-is('notes')");
      const link = files.locator("a:text-is('hello.txt')");
      await link.waitFor();
      const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
      expect(download.suggestedFilename()).toBe("hello.txt");
      expect(readFileSync((await download.path())!, "utf8")).toBe("hello from the agent\n");
      // Back up to /workspace with the parent row.
      await files.locator("a:has-text('.. (parent folder)')").click();
      await files.locator("a:text-is('notes/')").waitFor();
      expect(page.url()).toBe(`${t.url}/workspaces/${ws[0].id}`);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  }, 60_000);
});

describe("/operator", () => {
  test("a normal user has no Admin entry and /operator is not found", async () => {
    const user = await createUser(t);
    const { page, problems, close } = await open(user);
    try {
      await page.goto(`${t.url}/`);
      await page.waitForSelector("nav[aria-label=Main] a:text-is('Sessions')");
      expect(await page.locator("nav[aria-label=Main] a:text-is('Admin')").count()).toBe(0);
      await page.goto(`${t.url}/operator`);
      await page.waitForSelector("h1:text-is('Not found')");
      expect(await page.locator("input[name=password]").count()).toBe(0);
      // Titled like any unknown page, not "Admin".
      await page.waitForFunction(() => document.title === "Not found · runcell", null, { timeout: 5000 }).catch(() => undefined);
      expect(await page.title()).toBe("Not found · runcell");
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  test("an admin has the Admin entry; with the admin password it lists users and config", async () => {
    const admin = await createUser(t, { role: "admin" });
    const other = await createUser(t);
    const { page, problems, close } = await open(admin, [failedLoad(401)]);
    try {
      await page.goto(`${t.url}/`);
      const entry = page.locator("nav[aria-label=Main] a:text-is('Admin')");
      await entry.waitFor();
      await entry.click();
      await page.waitForURL(`${t.url}/operator`);
      expect(await entry.getAttribute("aria-current")).toBe("page");
      await page.waitForSelector("h2:text-is('Admin password')");
      expect(await page.title()).toBe("Admin · runcell");

      // A wrong password is refused and said so; nothing of the operator surface shows.
      await page.fill("input[name=password]", "not the admin password");
      await page.click("button:has-text('Open')");
      await page.waitForSelector("[role=alert]:not(:empty)");
      expect(await page.locator("#admin-users").count()).toBe(0);

      await page.fill("input[name=password]", ADMIN_PASSWORD);
      await page.click("button:has-text('Open')");
      const users = page.locator("section:has(#admin-users)");
      await users.locator(`td:text-is('${admin.email}')`).waitFor();
      await users.locator(`td:text-is('${other.email}')`).waitFor();
      expect(await users.locator(`tr:has(td:text-is('${admin.email}')) select`).inputValue()).toBe("admin");
      expect(await users.locator(`tr:has(td:text-is('${other.email}')) select`).inputValue()).toBe("user");

      // Config: the server's run-time settings.
      const cfg = (await api(t, "GET", "/admin/config", { authorization: `Bearer ${ADMIN_PASSWORD}` })).body;
      await page.waitForSelector("#admin-config");
      expect(await page.inputValue("input[name=per_minute]")).toBe(String(cfg.rate_limit.per_minute));
      expect(await page.inputValue("input[name=burst]")).toBe(String(cfg.rate_limit.burst));
      expect(await page.inputValue("input[name=default_max_concurrency]")).toBe(String(cfg.default_max_concurrency));
      expect(await page.inputValue("select[name=signup]")).toBe(cfg.signup);
      await page.waitForSelector("#admin-stats");
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  test("an admin changing their own role is asked first; declined, nothing changes", async () => {
    const admin = await createUser(t, { role: "admin" });
    const { page, problems, close } = await open(admin);
    try {
      const dialogs: string[] = [];
      page.removeAllListeners("dialog");
      page.on("dialog", (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      await page.goto(`${t.url}/operator`);
      await page.fill("input[name=password]", ADMIN_PASSWORD);
      await page.click("button:has-text('Open')");
      const mine = page.locator(`section:has(#admin-users) tr:has(td:text-is('${admin.email}')) select`);
      await mine.waitFor();
      await mine.selectOption("user");
      expect(dialogs).toEqual([expect.stringContaining("Remove your own admin role?")]);
      // Declined: nothing changed, here or on the server.
      await page.waitForFunction((el) => (el as HTMLSelectElement).value === "admin", await mine.elementHandle(), { timeout: 5000 });
      const me = (await api(t, "GET", "/admin/users?limit=100", { authorization: `Bearer ${ADMIN_PASSWORD}` })).body.data.find((u: { id: string }) => u.id === admin.id);
      expect(me.role).toBe("admin");
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  test("a config value the server refuses shows its error once, next to its field, and stays as typed", async () => {
    const admin = await createUser(t, { role: "admin" });
    const { page, problems, close } = await open(admin, [failedLoad(400)]);
    try {
      await page.goto(`${t.url}/operator`);
      await page.fill("input[name=password]", ADMIN_PASSWORD);
      await page.click("button:has-text('Open')");
      await page.waitForSelector("#admin-config");
      await page.fill("input[name=per_minute]", "90");
      await page.fill("input[name=burst]", "2000000000");
      await page.click("form:has(#admin-config) button:has-text('Save')");
      const err = await expectFieldError(page, "cfg-rate_limit.burst", "at most");
      const text = (await err.textContent())!;
      expect(text.split("rate_limit.burst").length).toBeLessThanOrEqual(2); // named at most once
      expect(await err.evaluate((e) => e.classList.contains("error"))).toBe(true);
      expect(await page.inputValue("input[name=burst]")).toBe("2000000000");
      expect(await page.inputValue("input[name=per_minute]")).toBe("90");
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});
