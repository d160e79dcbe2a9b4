import { Elysia, t } from "elysia";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, jsonBody, PageQuery, queryOf } from "../schema.ts";
import { ListOf } from "../../schema/common.ts";
import { IntegrationBody, IntegrationRecord } from "../../schema/integration.ts";
import { Queued } from "../../schema/notification.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Integrations"], summary, description, security: USER_SECURITY });

export const integrationRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/integrations" })
    .use(userGuard())
    .post(
      "/",
      async ({ user, body, request, set }) => {
        const { record, created } = await s.notifications.integrations.upsert(user.id, body, { ip: requestContext(request).ip });
        set.status = created ? 201 : 200;
        return record;
      },
      {
        ...jsonBody(IntegrationBody),
        response: { 200: IntegrationRecord, 201: IntegrationRecord, ...errorResponses(400, 401, 429) },
        detail: detail(
          "Configure your webhook (one per user; a second POST replaces it and answers 200)",
          "The URL's host must resolve to public addresses only (loopback, private, link-local, CGNAT, multicast and similar are refused with 400 on config.url unless the operator started runcell with --allow-private-webhooks). A replacement takes effect for deliveries still pending.",
        ),
      },
    )
    .get("/", ({ user, query }) => s.notifications.integrations.list(user.id, query), {
      query: queryOf(PageQuery),
      response: { 200: ListOf(IntegrationRecord), ...errorResponses(400, 401, 429) },
      detail: detail("List your integrations (at most one webhook)"),
    })
    .get("/:id", ({ user, params }) => s.notifications.integrations.get(user.id, params.id), {
      response: { 200: IntegrationRecord, ...errorResponses(401, 404, 429) },
      detail: detail("Get one integration"),
    })
    .delete(
      "/:id",
      async ({ user, params, request, set }) => {
        await s.notifications.integrations.delete(user.id, params.id, { ip: requestContext(request).ip });
        set.status = 204;
      },
      {
        response: { 204: t.Void(), ...errorResponses(401, 404, 429) },
        detail: detail("Delete the webhook; its pending deliveries end failed with a reason"),
      },
    )
    .post(
      "/:id/test",
      ({ user, params, set }) => {
        set.status = 202;
        return s.notifications.sendTest(user.id, params.id);
      },
      {
        response: { 202: Queued, ...errorResponses(401, 404, 429) },
        detail: detail("Send a test notification (source platform) through the normal delivery outbox"),
      },
    );
