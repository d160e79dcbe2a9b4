import { Elysia, t } from "elysia";
import type { Services } from "../../services.ts";
import { VERSION } from "../../version.ts";

const Health = t.Object({
  status: t.UnionEnum(["ok", "error"]),
  version: t.String(),
  db: t.UnionEnum(["ok", "error"]),
  docker: t.UnionEnum(["ok", "unavailable"]),
});

/** GET /healthz: no auth, no secrets; 503 only when the database does not answer. */
export const healthRoutes = (s: Services) => {
  const ping = s.sqlite.prepare("SELECT 1 AS ok");
  return new Elysia().get(
    "/healthz",
    ({ set }) => {
      let db: "ok" | "error" = "ok";
      try {
        ping.get();
      } catch {
        db = "error";
      }
      // Refresh the Docker probe in the background; answer from the last result.
      void s.docker.available();
      const docker = s.docker.status.ok ? "ok" : "unavailable";
      if (db !== "ok") set.status = 503;
      return { status: db === "ok" ? "ok" : "error", version: VERSION, db, docker } as const;
    },
    {
      response: { 200: Health, 503: Health },
      detail: { tags: ["Health"], summary: "Liveness and dependency status", security: [] },
    },
  );
};
