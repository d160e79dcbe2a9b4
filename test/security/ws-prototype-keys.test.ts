/**
 * A client-provided string used to index an object must only find that object's own entries. A
 * stream message typed "constructor", "__proto__" or "toString" used to find Object.prototype's
 * member and answer INTERNAL_ERROR (with an error log); it is VALIDATION_FAILED on "type". The same
 * own-property rule for the other places a caller's string picks an entry: a command-line flag, and
 * the stop reason a model server (a profile's base_url, so the user's choice) streams back.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { getProvider } from "../../src/agents/providers/index.ts";
import { ConfigError, parseArgs } from "../../src/config.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { createUser, type TestUser } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";
import { request, run } from "../agents/providers/scenarios.ts";

let t: TestApp;
let user: TestUser;

beforeAll(async () => {
  t = await startTestApp();
  user = await createUser(t);
});
afterAll(() => t.stop());

const PROTOTYPE_NAMES = ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf", "isPrototypeOf", "__defineGetter__", "toLocaleString"];

describe("stream message type", () => {
  test.each(PROTOTYPE_NAMES)('{"type":"%s"} → VALIDATION_FAILED on "type", no error log, socket stays open', async (name) => {
    const c = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${user.token}`] });
    const logsBefore = t.logs.length;
    c.send(`{"type":${JSON.stringify(name)},"request_id":"p1"}`);
    const err = await c.waitFor((f) => f.type === "error" && f.request_id === "p1");
    expect(err).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "type" } });
    expect(err.message).toContain("Unknown message type");
    // Not treated as a bug: nothing logged at error level.
    expect(t.logs.slice(logsBefore).filter((l) => JSON.parse(l).level === "error")).toEqual([]);
    // The socket is still usable.
    c.send({ type: "session.resume", session_id: "sess_nope", request_id: "p2" });
    expect(await c.waitFor((f) => f.type === "error" && f.request_id === "p2")).toMatchObject({ code: "NOT_FOUND" });
    expect(c.closed).toBeNull();
    c.close();
  });
});

describe("other lookups by a caller's string", () => {
  test.each(PROTOTYPE_NAMES)("the command-line flag --%s is unknown", (name) => {
    expect(() => parseArgs([`--${name}`, "x"], { "data-dir": true })).toThrow(ConfigError);
    expect(() => parseArgs([`--${name}`, "x"], { "data-dir": true })).toThrow(`unknown flag --${name}`);
  });

  test("a model server's stop_reason naming a prototype member maps to other", async () => {
    const mock = startMockAnthropic();
    try {
      for (const name of ["constructor", "__proto__", "toString", "valueOf"]) {
        mock.enqueue({ text: "x", stopReason: name });
        const { res, err } = await run(getProvider("anthropic"), request(mock));
        expect(err).toBeUndefined();
        expect(res!.stopReason).toBe("other");
      }
    } finally {
      await mock.stop();
    }
  });
});
