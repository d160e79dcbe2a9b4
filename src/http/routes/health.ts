import { Elysia, t } from "elysia";
import { jsonResponse } from "../json.ts";
import type { Services } from "../../services.ts";
import { VERSION } from "../../version.ts";

const Health = t.Object({
  status: t.UnionEnum(["ok", "error"]),
  version: t.String(),
  db: t.UnionEnum(["ok", "error"]),
  docker: t.UnionEnum(["ok", "unavailable"]),
});

const checks = new WeakMap<Services, () => Response>();

/**
 * GET /healthz's answer: no auth, no secrets; 503 only when the database does not answer. One per
 * app (the pipeline answers /healthz with it before routing; the route below documents it).
 */
export function healthCheck(s: Services): () => Response {
  let check = checks.get(s);
  if (check) return check;
  const ping = s.sqlite.prepare("SELECT 1 AS ok");
  // Four possible bodies: serialized once (this route is what load balancers poll).
  const bodies = new Map<string, string>();
  const body = (db: "ok" | "error", docker: "ok" | "unavailable") => {
    const key = db + docker;
    let b = bodies.get(key);
    if (!b) bodies.set(key, (b = JSON.stringify({ status: db === "ok" ? "ok" : "error", version: VERSION, db, docker })));
    return b;
  };
  check = () => {
    let db: "ok" | "error" = "ok";
    try {
      ping.get();
    } catch {
      db = "error";
    }
    // Refresh the Docker probe in the background; answer from the last result.
    s.docker.refreshIfStale();
    const docker = s.docker.status.ok ? "ok" : "unavailable";
    return jsonResponse(body(db, docker), db === "ok" ? 200 : 503);
  };
  checks.set(s, check);
  return check;
}

export const healthRoutes = (s: Services) =>
  new Elysia().get("/healthz", healthCheck(s), {
    response: { 200: Health, 503: Health },
    detail: { tags: ["Health"], summary: "Liveness and dependency status", security: [] },
  });
