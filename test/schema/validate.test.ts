/** The one validator: how fields are named and worded, for bodies, stream messages and profiles alike. */
import { describe, expect, test } from "bun:test";
import { AppError } from "../../src/lib/errors.ts";
import { Body, Nullable, OneOf, T } from "../../src/schema/common.ts";
import { check, fieldOf } from "../../src/schema/validate.ts";

const failure = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return e as AppError;
  }
  throw new Error("expected a validation error");
};

describe("fieldOf", () => {
  test.each([
    ["", "body", "body"],
    ["/name", "body", "name"],
    ["/model/base_url", "body", "model.base_url"],
    ["/tools/2", "body", "tools[2]"],
    ["/questions/0/options/1/label", "frame", "questions[0].options[1].label"],
    ["/env/A~1B", "body", "env.A/B"],
    ["", "frame", "frame"],
  ])("%p → %p", (path, root, field) => expect(fieldOf(path, root)).toBe(field));
});

describe("check", () => {
  const S = Body({
    name: T.String({ maxLength: 3 }),
    kind: T.Optional(OneOf(["a", "b"] as const)),
    tags: T.Optional(T.Array(T.String(), { uniqueItems: true })),
    pricing: T.Optional(Nullable(T.Object({ input: T.Number({ minimum: 0 }) }))),
    nested: T.Optional(T.Object({ x: T.Integer() })),
  });

  test("returns the value typed when it fits", () => {
    expect(check(S, { name: "abc", kind: "a" }).name).toBe("abc");
  });

  test.each([
    ["not an object", [1], "body", "Request body must be a JSON object"],
    ["missing", {}, "name", "name is required"],
    ["too long", { name: "abcd" }, "name", "name must be at most 3 characters"],
    ["wrong type", { name: 5 }, "name", "name must be a string"],
    ["null", { name: null }, "name", "name must not be null"],
    ["not one of", { name: "a", kind: "c" }, "kind", "kind must be one of a, b"],
    ["a duplicate names its second occurrence", { name: "a", tags: ["x", "y", "x"] }, "tags[2]", "tags[2] lists a value twice"],
    ["inside a nullable object", { name: "a", pricing: { input: -1 } }, "pricing.input", "pricing.input must be at least 0"],
    ["unknown top-level field", { name: "a", nme: 1 }, "nme", 'Unknown field "nme"'],
    ["unknown nested field (Body closes every object)", { name: "a", nested: { x: 1, y: 2 } }, "nested.y", 'Unknown field "nested.y"'],
  ])("%s → VALIDATION_FAILED on the field", (_name, value, field, message) => {
    const e = failure(() => check(S, value));
    expect(e).toBeInstanceOf(AppError);
    expect(e.code).toBe("VALIDATION_FAILED");
    expect(e.details?.field).toBe(field);
    expect(e.message).toBe(message);
  });

  test("a root other than body names the whole value by it", () => {
    expect(failure(() => check(T.Object({ a: T.String() }), 5, "frame")).details?.field).toBe("frame");
  });
});
