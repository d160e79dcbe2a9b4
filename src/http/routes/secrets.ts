/** /v1/secrets: the encrypted vault. Values go in and never come out through the API. */
import { Elysia, t } from "elysia";
import { ListOf } from "../../schema/common.ts";
import { SecretNameParam, SecretPutBody, SecretRecord } from "../../schema/secret.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { checkSecretName, checkSecretValue } from "../../vault/names.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { check } from "../../schema/validate.ts";
import { errorResponses, PageQuery, queryOf } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Secrets"], summary, description, security: USER_SECURITY });

export const secretRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/secrets" })
    .use(userGuard())
    .put(
      "/:name",
      async ({ user, params, body, request, set }) => {
        await s.secrets.put(user.id, params.name, body.value, { ip: requestContext(request).ip });
        set.status = 204;
      },
      {
        params: SecretNameParam,
        body: SecretPutBody,
        // The name first (it is in the path), then the body with the shared validator, then the value's own rules.
        transform({ body, params }) {
          checkSecretName(params.name, "name");
          checkSecretValue(check(SecretPutBody, body).value);
        },
        response: { 204: t.Void(), ...errorResponses(400, 401, 413, 429) },
        detail: detail("Create or replace a secret", "Encrypted at rest (AES-256-GCM). The value is never returned, logged or put in events."),
      },
    )
    .get("/", ({ user, query }) => s.secrets.list(user.id, query), {
      query: queryOf(PageQuery),
      response: { 200: ListOf(SecretRecord), ...errorResponses(400, 401, 429) },
      detail: detail("List your secrets (names and times, never values), newest first"),
    })
    .delete(
      "/:name",
      async ({ user, params, request, set }) => {
        await s.secrets.delete(user.id, params.name, { ip: requestContext(request).ip });
        set.status = 204;
      },
      { params: SecretNameParam, response: { 204: t.Void(), ...errorResponses(400, 401, 404, 429) }, detail: detail("Delete a secret") },
    );
