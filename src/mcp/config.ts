/**
 * The rules of a profile's `mcp_servers` a schema cannot state: names unique, an http server's URL
 * absolute http(s) without credentials, and headers that are the transport's own left alone.
 * Whether the URL's host may be reached is the network guard's call (src/mcp/manager.ts).
 */
import type { McpServerConfig } from "../db/schema.ts";
import { Errors } from "../lib/errors.ts";

/** Headers the streamable-HTTP transport sets itself. */
const TRANSPORT_HEADERS = new Set(["host", "content-length", "content-type", "transfer-encoding", "connection", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id"]);

export function checkMcpServers(list: McpServerConfig[], field = "mcp_servers"): McpServerConfig[] {
  const names = new Set<string>();
  list.forEach((s, i) => {
    const f = `${field}[${i}]`;
    const key = s.name.toLowerCase();
    if (names.has(key)) throw Errors.validation(`${f}.name`, `${f}.name "${s.name}" is used by another server: server names must be unique`, { reason: "duplicate" });
    names.add(key);
    // mcp__<server>__<tool>: a "__" inside the name or a "_" at its end would make `mcp__<server>__*`
    // also match another server's tools (server "a" and "a__b" or "a_").
    if (s.name.includes("__") || s.name.endsWith("_")) {
      throw Errors.validation(`${f}.name`, `${f}.name "${s.name}" must not contain "__" or end with "_": tools reach the model as mcp__<server>__<tool>`, { reason: "ambiguous name" });
    }
    if (s.transport !== "http") return;
    let u: URL;
    try {
      u = new URL(s.url);
    } catch {
      throw Errors.validation(`${f}.url`, `${f}.url must be an absolute http(s) URL`, { reason: "invalid URL" });
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") throw Errors.validation(`${f}.url`, `${f}.url must use http or https`, { reason: "invalid scheme" });
    if (u.username || u.password) {
      throw Errors.validation(`${f}.url`, `${f}.url must not contain credentials: put them in headers as {"secret": "NAME"}`, { reason: "credentials in URL" });
    }
    if (u.hash || s.url.includes("#")) throw Errors.validation(`${f}.url`, `${f}.url must not have a fragment`, { reason: "fragment" });
    for (const h of Object.keys(s.headers ?? {})) {
      if (TRANSPORT_HEADERS.has(h.toLowerCase())) throw Errors.validation(`${f}.headers.${h}`, `${f}.headers.${h} is set by the MCP transport itself and cannot be configured`, { reason: "not allowed" });
    }
  });
  return list;
}
