/** Every route module, mounted from one list. */
import type { Elysia } from "elysia";
import type { Services } from "../../services.ts";
import { apiTokenRoutes } from "./api-tokens.ts";
import { authRoutes } from "./auth.ts";
import { oauthRoutes } from "./oauth.ts";
import { setupRoutes } from "./setup.ts";
import { adminUserRoutes } from "./admin-users.ts";
import { adminConfigRoutes } from "./admin-config.ts";
import { adminStatsRoutes } from "./admin-stats.ts";
import { docsRoutes } from "./docs.ts";
import { healthRoutes } from "./health.ts";
import { profileRoutes } from "./profiles.ts";
import { meRoutes } from "./me.ts";
import { usageRoutes } from "./usage.ts";
import { secretRoutes } from "./secrets.ts";
import { integrationRoutes } from "./integrations.ts";
import { notificationRoutes } from "./notifications.ts";
import { adminNotificationRoutes } from "./admin-notifications.ts";
import { adminAuditRoutes } from "./admin-audit.ts";
import { workspaceRoutes } from "./workspaces.ts";
import { signedFileRoutes } from "./signed-files.ts";
import { adminWorkspaceRoutes } from "./admin-workspaces.ts";
import { taskRoutes } from "./tasks.ts";
import { sessionRoutes } from "./sessions.ts";
import { webRoutes } from "./web.ts";
import { playbookRoutes } from "./playbooks.ts";
import { hookRoutes } from "./hooks.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Router = Elysia<any, any, any, any, any, any, any>;

const MODULES: ((s: Services) => Router)[] = [healthRoutes, authRoutes, oauthRoutes, setupRoutes, apiTokenRoutes, meRoutes, usageRoutes, adminUserRoutes, adminConfigRoutes, adminStatsRoutes, profileRoutes, secretRoutes, integrationRoutes, notificationRoutes, adminNotificationRoutes, adminAuditRoutes, workspaceRoutes, signedFileRoutes, adminWorkspaceRoutes, taskRoutes, sessionRoutes, playbookRoutes, hookRoutes, webRoutes];

export function mountRoutes(router: Router, s: Services): Router {
  for (const m of MODULES) router = router.use(m(s));
  return router.use(docsRoutes(() => router, s.config.publicUrl));
}
