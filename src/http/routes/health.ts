import { Elysia, t } from "elysia";
import { jsonResponse } from "../json.ts";
import type { DirectAnswer } from "../pipeline.ts";
import type { Services } from "../../services.ts";
import { VERSION } from "../../version.ts";

const Health = t.Object({
  status: t.UnionEnum(["ok", "error"]),
  version: t.String(),
  db: t.UnionEnum(["ok", "error"]),
  docker: t.UnionEnum(["ok", "unavailable"], { description: "ok when a Docker host answers (with several hosts: any of them)" }),
  docker_hosts: t.Optional(t.Record(t.String(), t.UnionEnum(["ok", "unavailable"]), { description: "With several --docker-host: each host's last ping, by name" })),
  replica: t.String({ description: "The id of the server (replica) that answered, rep_…: one per process, also in the X-Runcell-Replica header and runcell_replica_info" }),
});

const checks = new WeakMap<Services, () => DirectAnswer>();

/**
 * The database probe's answer is reused for this long: a load balancer polling every few seconds
 * still gets a fresh one each time, while a flood of /healthz (unauthenticated, not rate-limited)
 * costs one SQLite read a second rather than one per request.
 */
export const DB_PROBE_MAX_AGE_MS = 1000;

/**
 * GET /healthz's answer: no auth, no secrets; 503 only when the database does not answer; `replica`
 * says which server answered (several replicas behind one load balancer). One per
 * app (the pipeline answers /healthz with it before routing; the route below documents it).
 */
export function healthCheck(s: Services): () => DirectAnswer {
  let check = checks.get(s);
  if (check) return check;
  const ping = () => s.store.ping();
  const hosts = s.workspaces.hosts.list;
  const replica = s.replicas.id;
  // A few possible bodies, keyed by a bit mask (bit 0: the database, bit i+1: host i answers),
  // each serialized once: this route is what load balancers poll.
  const bodies = new Map<number, string>();
  const body = (key: number) => {
    let b = bodies.get(key);
    if (!b) {
      const db = key & 1 ? "ok" : "error";
      const docker = key >> 1 ? "ok" : "unavailable";
      const perHost = hosts.length > 1 ? { docker_hosts: Object.fromEntries(hosts.map((h, i) => [h.name, key & (2 << i) ? "ok" : "unavailable"])) } : {};
      bodies.set(key, (b = JSON.stringify({ status: db, version: VERSION, db, docker, ...perHost, replica })));
    }
    return b;
  };
  let dbKey = 0;
  let probedAt = Number.NEGATIVE_INFINITY;
  // SQLite answers the probe synchronously; PostgreSQL's answer (a round trip) applies from the
  // next request on — the first probe ran when the server connected.
  let pinging = false;
  const pingResult = (ok: boolean) => {
    dbKey = ok ? 1 : 0;
  };
  if (s.store.dialect === "postgres") dbKey = 1;
  check = () => {
    const at = performance.now();
    if (at - probedAt >= DB_PROBE_MAX_AGE_MS && !pinging) {
      probedAt = at;
      try {
        const p = ping();
        if (p) {
          pinging = true;
          p.then(() => pingResult(true), () => pingResult(false)).finally(() => (pinging = false));
        } else pingResult(true);
      } catch {
        pingResult(false);
      }
    }
    let key = dbKey;
    // The hosts' last pings: the docker-host-health worker pings every host every 5 s.
    for (let i = 0; i < hosts.length && i < 30; i++) if (hosts[i]!.engine.status.ok) key |= 2 << i;
    return { json: body(key), status: key & 1 ? 200 : 503 };
  };
  checks.set(s, check);
  return check;
}

export const healthRoutes = (s: Services) => {
  const check = healthCheck(s);
  return new Elysia().get("/healthz", () => {
    const a = check();
    return jsonResponse(a.json, a.status);
  }, {
    response: { 200: Health, 503: Health },
    detail: { tags: ["Health"], summary: "Liveness and dependency status", security: [] },
  });
};
