/**
 * The dashboard in a real browser: Debian's Chromium driven by playwright-core (no downloaded
 * browser). Shared by every test under test/web/ and the CSP test.
 *
 *   const browser = await launchBrowser();
 *   const { context, page, problems } = await openPage(browser, { url: t.url, cookie: user.cookie });
 *   await page.goto(t.url);
 *   … drive the page (getByRole / getByLabel / getByText) …
 *   await screenshots(page, "chat");      // test-artifacts/screenshots/chat-{light,dark,phone}.png
 *   expectClean(problems);                 // no script error, no console error, no CSP violation
 *   await context.close();
 *   await browser.close();
 *
 * A page opened with `openPage` (or watched with `watchProblems`) records every *problem* in the
 * returned array: an uncaught exception (`pageerror`), a console message of type error (Chrome logs
 * a CSP violation as `Refused to …` or, since about version 140, `… violates the following Content
 * Security Policy directive …`, and a failed request as `Failed to load resource …`), any console
 * message mentioning a Content Security Policy, and (openPage only) each `securitypolicyviolation`
 * event the document fires, caught by an init script — so a violation is seen even if Chrome's
 * wording changes. Tests assert the array stays empty; an expected console error (e.g. the 401 of a
 * wrong password) is let through with `allow`; a securitypolicyviolation event never is.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Browser, type BrowserContext, type BrowserContextOptions, chromium, type Page } from "playwright-core";

export type { Browser, BrowserContext, Page };

/** Launches Chromium headless (CHROMIUM_PATH overrides /usr/bin/chromium). */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
}

/** Console text of an expected failed request with a 4xx status (`allow: [EXPECTED_4XX]`). */
export const EXPECTED_4XX = /^Failed to load resource: the server responded with a status of 4\d\d/;

export interface WatchOptions {
  /** Problems matching one of these are ignored (e.g. EXPECTED_4XX in a wrong-password test). */
  allow?: RegExp[];
}

/** Binding the init script reports `securitypolicyviolation` events through. */
const CSP_BINDING = "__reportCspViolation";

/**
 * Records the page's problems into `problems` (see the file comment); returns the same array.
 * Call before the first navigation. `opts.allow` is read at each problem, so a test may push a
 * pattern into it for one step and pop it after.
 */
export function watchProblems(page: Page, problems: string[] = [], opts: WatchOptions = {}): string[] {
  const allow = (opts.allow ??= []);
  const add = (p: string) => {
    if (!allow.some((re) => re.test(p.replace(/^[a-z]+: /, "")))) problems.push(p);
  };
  page.on("pageerror", (e) => add(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    const text = m.text();
    if (m.type() === "error" || /Content Security Policy|Refused to/i.test(text)) add(`console: ${text}`);
  });
  return problems;
}

/** Reports each securitypolicyviolation the context's documents fire into `problems`. */
async function watchCspViolations(context: BrowserContext, problems: string[]) {
  await context.exposeBinding(CSP_BINDING, (_src, v: { directive: string; blocked: string; source: string }) => {
    problems.push(`csp: ${v.directive} blocked ${v.blocked || "(inline)"} at ${v.source}`);
  });
  await context.addInitScript(`document.addEventListener("securitypolicyviolation", (e) => {
    const report = window[${JSON.stringify(CSP_BINDING)}];
    if (report) report({ directive: e.violatedDirective, blocked: e.blockedURI, source: e.sourceFile + ":" + e.lineNumber });
  });`);
}

/** Signs a browser context in as a user: their session cookie (`name=value`, as TestUser.cookie) for `url`'s origin. */
export async function signInContext(context: BrowserContext, url: string, cookie: string) {
  const i = cookie.indexOf("=");
  await context.addCookies([{ name: cookie.slice(0, i), value: cookie.slice(i + 1), url }]);
}

export interface OpenPageOptions extends WatchOptions {
  /** The app's base URL (needed with `cookie`). */
  url?: string;
  /** A user's session cookie (TestUser.cookie): the context is signed in as them. */
  cookie?: string;
  /** Extra context options (viewport, colorScheme, permissions…). */
  context?: BrowserContextOptions;
}

export interface WatchedPage {
  context: BrowserContext;
  page: Page;
  /** Problems seen so far (see the file comment); assert it stays empty with expectClean. */
  problems: string[];
  /** The patterns of problems to ignore; push one for a step that expects it, pop it after. */
  allow: RegExp[];
}

/** A new context (signed in when `cookie` is given) and page whose problems are recorded. */
export async function openPage(browser: Browser, opts: OpenPageOptions = {}): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...opts.context });
  if (opts.cookie) {
    if (!opts.url) throw new Error("openPage: `cookie` needs `url`");
    await signInContext(context, opts.url, opts.cookie);
  }
  const problems: string[] = [];
  const allow = [...(opts.allow ?? [])];
  await watchCspViolations(context, problems);
  const page = await context.newPage();
  watchProblems(page, problems, { allow });
  return { context, page, problems, allow };
}

/** Fails with the list of problems when there is any. */
export function expectClean(problems: string[]) {
  if (problems.length) throw new Error(`the page had ${problems.length} problem(s):\n  ${problems.join("\n  ")}`);
}

export const SCREENSHOT_DIR = join(import.meta.dir, "../../test-artifacts/screenshots");
export type ScreenshotVariant = "light" | "dark" | "phone";
/** The phone width of the issue (an iPhone 12–15). */
export const PHONE = { width: 390, height: 844 };

/**
 * Saves test-artifacts/screenshots/<name>-<variant>.png of the page as it is: `light` and `dark`
 * at its viewport with that color scheme, `phone` at 390 px wide (light). The page's viewport and
 * scheme are restored afterwards. Returns the paths written.
 */
export async function screenshots(page: Page, name: string, variants: ScreenshotVariant[] = ["light", "dark", "phone"]): Promise<string[]> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const size = page.viewportSize();
  const paths: string[] = [];
  for (const v of variants) {
    await page.emulateMedia({ colorScheme: v === "dark" ? "dark" : "light" });
    if (v === "phone") await page.setViewportSize(PHONE);
    else if (size) await page.setViewportSize(size);
    // Let layout and transitions settle at the new size / scheme.
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const path = join(SCREENSHOT_DIR, `${name}-${v}.png`);
    await page.screenshot({ path, fullPage: v === "phone" });
    paths.push(path);
  }
  if (size) await page.setViewportSize(size);
  await page.emulateMedia({ colorScheme: null });
  return paths;
}

/** The pages a test file opens, each in its own context: `open` one, `closeAll` after a test. */
export function pagePool(browser: () => Browser) {
  const open: WatchedPage[] = [];
  return {
    async open(opts: OpenPageOptions = {}): Promise<WatchedPage> {
      const w = await openPage(browser(), opts);
      open.push(w);
      return w;
    },
    async closeAll(): Promise<void> {
      for (const w of open.splice(0)) await w.context.close();
    },
  };
}

/** The chat view's parts as a person finds them: the last turn, the composer, and sending a message with Enter. */
export const lastTurn = (p: Page) => p.getByRole("article").last();
export const composer = (p: Page) => p.getByRole("textbox", { name: "Message" });
export async function send(p: Page, text: string): Promise<void> {
  await composer(p).fill(text);
  await composer(p).press("Enter");
}
