/** Docker image reference syntax accepted for a profile's `image`. */
import { expect, test } from "bun:test";
import { isImageReference } from "../../src/lib/image-ref.ts";

test.each([
  "busybox",
  "debian:bookworm",
  "runcell/workspace:latest",
  "runcell-test/busybox:latest",
  "library/ubuntu:22.04",
  "localhost:5000/team/agent:1.0",
  "registry.example.com/team/img@sha256:" + "a".repeat(64),
  "ghcr.io/owner/image:v1.2.3-rc_1",
  "[::1]:5000/x",
  "a__b",
  "a-----b",
  "My.Registry.io/lower/case",
])("accepts %s", (ref) => {
  expect(isImageReference(ref)).toBe(true);
});

test.each([
  "",
  "Ubuntu",
  "my.reg/UPPER/path",
  ":latest",
  "foo:",
  "foo::bar",
  "foo bar",
  "-foo",
  "foo-",
  "foo/",
  "/foo",
  "foo:-tag",
  "foo@sha256:abc",
  "foo:" + "a".repeat(129),
  "a___b",
  "http://example.com/x",
  "foo;rm -rf /",
  "x/".repeat(130) + "y",
])("refuses %p", (ref) => {
  expect(isImageReference(ref)).toBe(false);
});
