/**
 * The built-in dashboard in a real browser: the first-run setup link creates the admin account,
 * the dashboard signs in with the cookie, a demo profile is created, a session runs a prompt whose
 * tool call and answer stream in, and sign-out returns to the sign-in form. No script error, no
 * CSP violation.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser } from "../helpers/browser.ts";

let t: TestApp;
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  t = await startTestApp();
  browser = await launchBrowser();
  page = await browser.newPage();
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    // An expected 4xx (a wrong password) is logged by Chrome as a failed resource; anything else
    // logged as an error — a CSP violation ("Refused to …"), a script error — is a problem.
    if (m.type() === "error" && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
});
afterAll(async () => {
  await browser?.close();
  await t.stop();
});

test("setup link → dashboard → demo profile → streamed session → sign out", async () => {
  const link = t.app.services.setup.issue()!;
  await page.goto(`${t.url}/setup#${link.token}`);
  await page.fill("#email", "owner@example.com");
  await page.fill("#name", "Owner");
  await page.fill("#password", "a long enough passphrase");
  await page.click("#submit");
  await page.waitForURL(`${t.url}/`);
  await page.waitForSelector("#who:has-text('owner@example.com (admin)')");

  await page.click("button[data-view=profiles]");
  await page.fill("#new-profile input[name=name]", "Demo agent");
  await page.selectOption("#new-profile select[name=provider]", "demo");
  await page.click("#new-profile button[type=submit]");
  await page.waitForSelector("#profile-rows tr:has-text('Demo agent')");

  await page.click("button[data-view=chat]");
  await page.waitForSelector("#new-session select option:has-text('Demo agent')", { state: "attached" });
  await page.click("#new-session button[type=submit]");
  await page.waitForSelector("#transcript p:has-text('is ready')");
  await page.fill("#composer textarea", "Show me around");
  await page.press("#composer textarea", "Enter");
  await page.waitForSelector("details.tool summary:has-text('Bash')", { timeout: 30_000 });
  const answer = await page.waitForSelector(".msg.agent:not(.streaming) .meta", { timeout: 30_000 });
  expect(await answer.textContent()).toMatch(/\d+ in · \d+ out · \$/);
  expect(await page.textContent(".msg.user")).toBe("Show me around");
  // The tool's output from the container is shown with its call.
  await page.click("details.tool summary");
  expect(await page.textContent("details.tool")).toContain("[exit code: 0]");
  await page.waitForSelector("#sessions li:has-text('Show me around')");

  await page.click("button[data-view=tokens]");
  await page.fill("#new-token input[name=name]", "laptop");
  await page.click("#new-token button[type=submit]");
  await page.waitForSelector("#new-token-value code");
  expect(await page.textContent("#new-token-value code")).toMatch(/^rc_[0-9a-f]{64}$/);

  await page.click("#signout");
  await page.waitForSelector("#signin-form");
  expect(await page.isVisible("#signin-form")).toBe(true);
  expect(problems).toEqual([]);
}, 120_000);

test("sign-in with a wrong password shows the error; the right one opens the dashboard", async () => {
  await page.goto(t.url);
  await page.fill("#signin-form input[name=email]", "owner@example.com");
  await page.fill("#signin-form input[name=password]", "not the password");
  await page.click("#signin-form button[type=submit]");
  await page.waitForSelector("#signin-error:has-text('Invalid email or password')");
  await page.fill("#signin-form input[name=password]", "a long enough passphrase");
  await page.click("#signin-form button[type=submit]");
  await page.waitForSelector("#who:has-text('owner@example.com')");
  expect(problems).toEqual([]);
});
