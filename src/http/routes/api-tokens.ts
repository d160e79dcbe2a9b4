/** /v1/api-tokens: create (the only time the plaintext is shown), list, delete. Logic in src/auth/tokens.ts. */
import { Elysia, t } from "elysia";
import { CreatedToken, TokenCreateBody, TokenRecord } from "../../schema/api-token.ts";
import { ListOf } from "../../schema/common.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, jsonBody, PageQuery, queryOf } from "../schema.ts";

const detail = (summary: string) => ({ tags: ["API tokens"], summary, security: USER_SECURITY });

export const apiTokenRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/api-tokens" })
    .use(userGuard())
    .post(
      "",
      async ({ user, body, request, set }) => {
        set.status = 201;
        return s.tokens.create(user.id, body.name, { ip: requestContext(request).ip });
      },
      {
        ...jsonBody(TokenCreateBody),
        response: { 201: CreatedToken, ...errorResponses(400, 401, 429) },
        detail: detail("Create an API token (the only time its plaintext is returned)"),
      },
    )
    .get("", ({ user, query }) => s.tokens.list(user.id, query), {
      query: queryOf(PageQuery),
      response: { 200: ListOf(TokenRecord), ...errorResponses(400, 401, 429) },
      detail: detail("List your API tokens (never the token itself)"),
    })
    .delete(
      "/:id",
      async ({ user, params, request, set }) => {
        await s.tokens.delete(user.id, params.id, { ip: requestContext(request).ip });
        set.status = 204;
      },
      { response: { 204: t.Void(), ...errorResponses(401, 404, 429) }, detail: detail("Delete a token; requests with it are refused at once") },
    );
