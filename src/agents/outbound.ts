/**
 * The URLs besides the model's that a profile or a session points runcell at — MCP servers over
 * HTTP and git repositories — checked when they are saved with the same network rule as model
 * URLs (src/agents/model-network.ts), and again when they are used. Plain-http repositories are
 * only for hosts the owner may reach on private networks (a local git server); elsewhere https.
 */
import type { McpServerConfig, RepositoryConfig } from "../db/schema.ts";
import { parseRepoUrl } from "../git/repository.ts";
import { Errors } from "../lib/errors.ts";

export interface OutboundNet {
  checkUrl(userId: string, url: string, field: string, what?: string): Promise<void>;
  mayUsePrivate(userId: string, url: URL): Promise<boolean>;
}

export async function checkOutbound(net: OutboundNet, userId: string, f: { mcp_servers?: McpServerConfig[]; repositories?: RepositoryConfig[] }): Promise<void> {
  for (const [i, s] of (f.mcp_servers ?? []).entries()) {
    if (s.transport === "http") await net.checkUrl(userId, s.url, `mcp_servers[${i}].url`, "MCP servers");
  }
  for (const [i, r] of (f.repositories ?? []).entries()) {
    const field = `repositories[${i}].url`;
    const repo = parseRepoUrl(r.url, field);
    if (repo.scheme === "http" && !(await net.mayUsePrivate(userId, new URL(repo.url)))) {
      throw Errors.validation(field, `${field} must use https or ssh (plain http is only for git servers on private networks that admins or the operator's --allow-model-hosts allow)`, { reason: "invalid scheme" });
    }
    await net.checkUrl(userId, repo.url, field, "git servers");
  }
}
