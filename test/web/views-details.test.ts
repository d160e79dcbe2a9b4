/**
 * Details of the dashboard's views in real Chromium against a real app (no workspace needed):
 *
 * - sign-up: with `--signup open` the sign-in view links to a sign-up form that creates the
 *   account and signs in; with sign-up closed there is no such link;
 * - long unbroken names (a playbook's, a profile's) wrap at 390 px instead of widening the page;
 * - focus goes to what to fix: the secret's name the server refused, the playbook's time zone
 *   that is not one; each API token's Revoke button names its token;
 * - each view has its own document title ("Profiles · runcell");
 * - Playbooks opened while the server cannot be reached says so, not "You need a profile first".
 *
 * Any console error, page error or CSP violation fails the test (expected ones aside).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createProfile } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { type Browser, expectClean, EXPECTED_4XX, launchBrowser, openPage, pagePool, PHONE, type WatchedPage } from "../helpers/browser.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let mock: MockProviderServer;
let browser: Browser;
let user: TestUser;
let profileId: string;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  browser = await launchBrowser();
  user = await createUser(t);
  profileId = await createProfile(t, user, { mock });
});
afterAll(async () => {
  await browser?.close();
  await mock?.stop();
  await t?.stop();
});

const pages = pagePool(() => browser);
const page = (app: TestApp, u: TestUser | null, opts: Parameters<typeof openPage>[1] = {}): Promise<WatchedPage> => pages.open({ url: app.url, cookie: u?.cookie, ...opts });
const closePages = () => pages.closeAll();
const focusedName = (w: WatchedPage) => w.page.evaluate(() => (document.activeElement as HTMLInputElement | null)?.name ?? document.activeElement?.tagName);

// -------------------------------------------------------------------------------------------------

describe("sign-up", () => {
  test("with sign-up open, the sign-in view links to a sign-up form that creates the account and signs in", async () => {
    const openApp = await startTestApp({ flags: ["--signup", "open"] });
    try {
      const w = await page(openApp, null);
      const p = w.page;
      await p.goto(openApp.url);
      await p.getByRole("heading", { name: "Sign in" }).waitFor();
      await p.getByRole("button", { name: "Create an account" }).click();
      await p.getByRole("heading", { name: "Create an account" }).waitFor();
      expect(await p.title()).toBe("Sign in · runcell");
      await p.getByLabel("Name (optional)").fill("New Person");
      await p.getByLabel("Email").fill("new.person@example.com");
      await p.getByLabel("Password").fill("a long enough passphrase");
      await p.getByRole("button", { name: "Create account" }).click();
      await p.getByText("new.person@example.com").waitFor();
      await p.getByRole("button", { name: "Sign out" }).waitFor();
      expectClean(w.problems);
      await closePages();
    } finally {
      await openApp.stop();
    }
  }, 60_000);

  test("with sign-up closed (the default), there is no sign-up link", async () => {
    const w = await page(t, null);
    await w.page.goto(t.url);
    await w.page.getByRole("heading", { name: "Sign in" }).waitFor();
    // The providers (and sign-up) answer has come: the OAuth-less list is drawn.
    await w.page.waitForLoadState("networkidle");
    expect(await w.page.getByRole("button", { name: "Create an account" }).count()).toBe(0);
    expectClean(w.problems);
    await closePages();
  });
});

// -------------------------------------------------------------------------------------------------

test("long unbroken names wrap at 390 px: the page is never wider than the screen", async () => {
  const long = "nightly_dependency_upgrade_monorepo_with_a_much_longer_name";
  const pb = await api(t, "POST", "/v1/playbooks", user.bearer, { name: long, profile_id: profileId, prompt: "Upgrade", schedule: "0 3 * * *", timezone: "UTC" });
  expect(pb.status, JSON.stringify(pb.body)).toBe(201);
  const w = await page(t, user, { context: { viewport: PHONE } });
  for (const path of [`/playbooks/${pb.body.id}`, "/playbooks"]) {
    await w.page.goto(`${t.url}${path}`);
    await w.page.getByText(long).first().waitFor();
    expect(await w.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(PHONE.width);
  }
  expectClean(w.problems);
  await closePages();
});

// -------------------------------------------------------------------------------------------------

test("Playbooks opened while the server cannot be reached says so, never that a profile is needed first", async () => {
  const w = await page(t, user);
  await w.page.goto(`${t.url}/secrets`);
  await w.page.waitForFunction((title) => document.title === title, "Secrets · runcell");
  w.allow.push(/ERR_INTERNET_DISCONNECTED/);
  await w.page.context().setOffline(true);
  await w.page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Playbooks" }).click();
  await w.page.getByRole("alert").filter({ hasText: "could not be reached" }).waitFor();
  await Bun.sleep(200);
  expect(await w.page.getByText("You need a profile first").count()).toBe(0);
  expect(await w.page.getByText("No playbooks yet.").count()).toBe(0);
  // Back online, the page loads: the form with the user's profile.
  await w.page.context().setOffline(false);
  await w.page.reload();
  await w.page.getByRole("button", { name: "Create playbook" }).waitFor();
  expect(await w.page.getByText("You need a profile first").count()).toBe(0);
  w.allow.pop();
  expectClean(w.problems);
  await closePages();
});

test("the profile form's limits say the user's ceilings (GET /v1/me), not only the server's bounds", async () => {
  const owner = await createUser(t);
  await t.app.services.users.adminPatch(owner.id, { policy: { max_memory_mb: 512, max_turns: 30 } });
  const w = await page(t, owner);
  await w.page.goto(`${t.url}/profiles`);
  await w.page.getByText("Container memory (swap included) (64–512)").waitFor();
  expect(await w.page.getAttribute("[id='pf-limits.memory_mb']", "max")).toBe("512");
  await w.page.getByText("Model requests per task (1–30)").waitFor();
  // No ceiling lowered: the server's bound.
  await w.page.getByText("Container processes (32–65,536)").waitFor();
  expectClean(w.problems);
  await closePages();
});

test("Playbooks whose profiles could not be loaded show each playbook's profile id, not a placeholder that never resolves", async () => {
  const owner = await createUser(t);
  const profile = await api(t, "POST", "/v1/profiles", owner.bearer, { name: "for the list", system_prompt: "x", model: { provider: "demo", name: "demo" } });
  expect(profile.status, JSON.stringify(profile.body)).toBe(201);
  const pb = await api(t, "POST", "/v1/playbooks", owner.bearer, { name: "nightly", profile_id: profile.body.id, prompt: "go" });
  expect(pb.status, JSON.stringify(pb.body)).toBe(201);
  const w = await page(t, owner);
  w.allow.push(/status of 503/);
  await w.page.route("**/v1/profiles?**", (r) => r.fulfill({ status: 503, contentType: "application/json", body: JSON.stringify({ error: "Not available now", code: "INTERNAL_ERROR" }) }));
  await w.page.goto(`${t.url}/playbooks`);
  await w.page.getByRole("alert").filter({ hasText: "The profiles could not be loaded" }).waitFor();
  await w.page.getByRole("row").filter({ hasText: "nightly" }).getByText(profile.body.id).waitFor();
  await w.page.goto(`${t.url}/playbooks/${pb.body.id}`);
  await w.page.getByRole("definition").filter({ hasText: profile.body.id }).waitFor();
  expectClean(w.problems);
  await closePages();
});

// -------------------------------------------------------------------------------------------------

describe("focus and names", () => {
  test("a secret name the server refuses gets the focus", async () => {
    const w = await page(t, user, { allow: [EXPECTED_4XX] });
    await w.page.goto(`${t.url}/secrets`);
    await w.page.waitForFunction((title) => document.title === title, "Secrets · runcell");
    await w.page.locator("form input[name=name]").fill("bad name!");
    await w.page.locator("form input[name=value]").fill("v");
    await w.page.getByRole("button", { name: "Save secret" }).click();
    await w.page.getByRole("alert").waitFor();
    await w.page.waitForFunction(() => (document.activeElement as HTMLInputElement | null)?.name === "name", null, { timeout: 5000 }).catch(() => {});
    expect(await focusedName(w)).toBe("name");
    expectClean(w.problems);
    await closePages();
  });

  test("a time zone that is not one gets the focus when the playbook is saved", async () => {
    const w = await page(t, user);
    await w.page.goto(`${t.url}/playbooks`);
    await w.page.waitForFunction((title) => document.title === title, "Playbooks · runcell");
    await w.page.getByLabel("Name").fill("With a bad zone");
    await w.page.getByLabel("Prompt").fill("Do it");
    await w.page.getByLabel("Schedule (cron, optional)").fill("0 3 * * *");
    await w.page.getByLabel("Time zone of the schedule").fill("Mars/Olympus");
    await w.page.getByRole("button", { name: "Create playbook" }).click();
    await w.page.getByText(/is not an IANA time zone/).waitFor();
    expect(await w.page.evaluate(() => document.activeElement?.id)).toBe("pb-timezone");
    expect(await w.page.getByLabel("Time zone of the schedule").getAttribute("aria-invalid")).toBe("true");
    expectClean(w.problems);
    await closePages();
  });

  test("each API token's Revoke button names its token; each view has its own title", async () => {
    const u = await createUser(t);
    for (const name of ["ci deploy", "laptop"]) expect((await api(t, "POST", "/v1/api-tokens", u.bearer, { name })).status).toBe(201);
    const w = await page(t, u);
    await w.page.goto(`${t.url}/tokens`);
    await w.page.getByRole("button", { name: "Revoke ci deploy" }).waitFor();
    await w.page.getByRole("button", { name: "Revoke laptop" }).waitFor();
    await w.page.waitForFunction((title) => document.title === title, "API tokens · runcell");
    await w.page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Profiles" }).click();
    await w.page.waitForFunction(() => document.title === "Profiles · runcell");
    await w.page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Sessions" }).click();
    await w.page.waitForFunction(() => document.title === "Sessions · runcell");
    expectClean(w.problems);
    await closePages();
  });
});
