/**
 * Agent test helpers: a profile pointed at a local provider mock (real wire format), waiting for a
 * task to settle, and reading a session's persisted frames.
 */
import { expect } from "bun:test";
import type { MockProviderServer } from "./mock-provider.ts";
import type { TestApp } from "./app.ts";
import { api, type TestUser } from "./users.ts";

export interface ProfileOptions {
  mock: MockProviderServer;
  provider?: "anthropic" | "openai";
  tools?: string[];
  limits?: Record<string, number>;
  env?: Record<string, string | { secret: string }>;
  system_prompt?: string;
  pricing?: { input_per_mtok: number; output_per_mtok: number };
  /** Default: the server's workspace image. */
  image?: string;
  /** Any other profile fields (mcp_servers, repositories…), applied last. */
  extra?: Record<string, unknown>;
}

export async function createProfile(t: TestApp, user: TestUser, o: ProfileOptions): Promise<string> {
  const provider = o.provider ?? "anthropic";
  const r = await api(t, "POST", "/v1/profiles", user.bearer, {
    name: `test ${provider}`,
    system_prompt: o.system_prompt ?? "You are a test agent.",
    model: { provider, name: provider === "anthropic" ? "claude-sonnet-4-6" : "gpt-4o-mini", base_url: o.mock.url, ...(o.pricing ? { pricing: o.pricing } : {}) },
    image: o.image ?? t.config.workspaceImage,
    network: "none",
    ...(o.tools ? { tools: o.tools } : {}),
    ...(o.env ? { env: o.env } : {}),
    limits: { max_turns: 10, max_budget_usd: 5, max_concurrency: 50, memory_mb: 256, cpus: 0.5, pids: 128, ...(o.limits ?? {}) },
    ...o.extra,
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

const FINAL = ["completed", "failed", "cancelled"];

export async function waitTask(t: TestApp, user: TestUser, taskId: string, statuses: string[] = FINAL, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await api(t, "GET", `/v1/tasks/${taskId}`, user.bearer);
    if (statuses.includes(r.body?.status)) return r.body;
    if (Date.now() > deadline) throw new Error(`task ${taskId} still ${r.body?.status} after ${timeoutMs} ms: ${JSON.stringify(r.body)}`);
    await Bun.sleep(25);
  }
}

export async function sessionFrames(t: TestApp, user: TestUser, sessionId: string): Promise<any[]> {
  const out: any[] = [];
  let after = 0;
  for (;;) {
    const r = await api(t, "GET", `/v1/sessions/${sessionId}/events?after=${after}&limit=1000`, user.bearer);
    expect(r.status).toBe(200);
    out.push(...r.body.data);
    if (!r.body.next_cursor) return out;
    after = Number(r.body.next_cursor);
  }
}

export async function submit(t: TestApp, user: TestUser, body: Record<string, unknown>) {
  const r = await api(t, "POST", "/v1/tasks", user.bearer, body);
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body as { task_id: string; session_id: string; status: string };
}

/** Tool results the loop sent in the last user message of an Anthropic request body. */
export function lastToolResults(body: any): { tool_use_id: string; content: string; is_error?: boolean }[] {
  const last = body.messages[body.messages.length - 1];
  return (last?.content ?? []).filter((b: any) => b.type === "tool_result").map((b: any) => ({
    tool_use_id: b.tool_use_id,
    content: typeof b.content === "string" ? b.content : (b.content ?? []).map((c: any) => c.text ?? "").join(""),
    is_error: b.is_error,
  }));
}
