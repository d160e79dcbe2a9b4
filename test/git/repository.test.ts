/** Repository entries: URL grammar, checkout directories, merging a session's with its profile's. */
import { expect, test } from "bun:test";
import { checkBesideProfile, checkoutPath, checkRepositories, mergeRepositories, parseRepoUrl } from "../../src/git/repository.ts";

test.each([
  ["https://github.com/acme/app.git", "https", "github.com", 443, "https://github.com/acme/app.git"],
  ["ssh://git@github.com:2222/acme/app.git", "ssh", "github.com", 2222, "ssh://git@github.com:2222/acme/app.git"],
  ["git@github.com:acme/app.git", "ssh", "github.com", 22, "ssh://git@github.com/acme/app.git"],
  ["http://127.0.0.1:8080/app.git", "http", "127.0.0.1", 8080, "http://127.0.0.1:8080/app.git"],
])("%s", (raw, scheme, host, port, url) => {
  expect(parseRepoUrl(raw, "url")).toEqual({ scheme: scheme as "https", host, port, url });
});

test.each([
  ["ftp://example.com/a.git", "must use https or ssh"],
  ["https://user:tok@example.com/a.git", "must not contain credentials"],
  ["https://tok@example.com/a.git", "must not contain credentials"],
  ["https://example.com/a.git?x=1", "query string"],
  ["https://example.com/", "must name a host and a repository path"],
  ["file:///etc", "must use https or ssh"],
  ["ext::sh -c touch% /tmp/pwned", "must use https or ssh"],
  ["not a url", "https:// or ssh://"],
])("%s is refused", (raw, message) => {
  expect(() => parseRepoUrl(raw, "repositories[0].url")).toThrow(message);
});

test("checkout directories: the path, else the URL's name; distinct and not nested", () => {
  expect(checkoutPath({ url: "https://example.com/acme/app.git" }, "r")).toBe("/workspace/app");
  expect(checkoutPath({ url: "git@example.com:acme/tool" }, "r")).toBe("/workspace/tool");
  expect(checkoutPath({ url: "https://example.com/a.git", path: "src/lib" }, "r")).toBe("/workspace/src/lib");
  expect(() => checkoutPath({ url: "https://example.com/a.git", path: "../x" }, "r")).toThrow("outside /workspace");
  expect(() => checkoutPath({ url: "https://example.com/a.git", path: "/workspace" }, "r")).toThrow("not /workspace itself");
  expect(() => checkRepositories([{ url: "https://e.com/a.git" }, { url: "https://e.com/b.git", path: "a/sub" }])).toThrow("overlaps /workspace/a");
});

test("a session's repositories replace the profile's at the same directory and add the rest", () => {
  const profile = [{ url: "https://e.com/a.git" }, { url: "https://e.com/b.git" }];
  const session = [{ url: "https://e.com/a.git", ref: "feature" }, { url: "https://e.com/c.git" }];
  expect(mergeRepositories(profile, session)).toEqual([{ url: "https://e.com/b.git" }, { url: "https://e.com/a.git", ref: "feature" }, { url: "https://e.com/c.git" }]);
  expect(mergeRepositories(profile, null)).toBe(profile);
});

test("a session's repository nested in (or around) one of the profile's is refused on its path; the same path replaces it", () => {
  const profile = [{ url: "https://e.com/pub.git", path: "app" }];
  expect(() => checkBesideProfile(profile, [{ url: "https://e.com/pub2.git", path: "app/sub" }])).toThrow("repositories[0] would be checked out to /workspace/app/sub, which overlaps /workspace/app of the profile's repositories");
  expect(() => checkBesideProfile(profile, [{ url: "https://e.com/x.git", path: "y" }, { url: "https://e.com/root.git", path: "a" }])).not.toThrow();
  expect(() => checkBesideProfile([{ url: "https://e.com/pub.git", path: "app/inner" }], [{ url: "https://e.com/outer.git", path: "app" }])).toThrow("overlaps /workspace/app/inner");
  expect(() => checkBesideProfile(profile, [{ url: "https://e.com/other.git", path: "app" }])).not.toThrow();
  let thrown: unknown = null;
  try {
    checkBesideProfile(profile, [{ url: "https://e.com/ok.git", path: "ok" }, { url: "https://e.com/pub2.git", path: "app/sub" }]);
  } catch (e) {
    thrown = e;
  }
  expect((thrown as { details?: { field?: string } } | null)?.details?.field).toBe("repositories[1].path");
});
