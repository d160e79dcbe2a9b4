import { Elysia, t } from "elysia";
import type { Services } from "../../services.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, jsonBody, ListOf, PageQuery, Timestamp } from "../schema.ts";

const TokenRecord = t.Object({ id: t.String(), name: t.String(), created_at: Timestamp, last_used_at: t.Union([Timestamp, t.Null()]) });
const detail = (summary: string) => ({ tags: ["API tokens"], summary, security: USER_SECURITY });

export const apiTokenRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/api-tokens" })
    .use(userGuard())
    .post(
      "",
      async ({ user, body, set }) => {
        const created = await s.tokens.create(user.id, body.name);
        set.status = 201;
        return { id: created.id, name: created.name, token: created.token, created_at: created.created_at };
      },
      {
        ...jsonBody(t.Object({ name: t.String({ minLength: 1, maxLength: 100 }) })),
        response: { 201: t.Object({ id: t.String(), name: t.String(), token: t.String(), created_at: Timestamp }), ...errorResponses(400, 401, 429) },
        detail: detail("Create an API token (the only time its plaintext is returned)"),
      },
    )
    .get("", ({ user, query }) => s.tokens.list(user.id, query), {
      query: t.Object(PageQuery),
      response: { 200: ListOf(TokenRecord), ...errorResponses(400, 401, 429) },
      detail: detail("List your API tokens (never the token itself)"),
    })
    .delete(
      "/:id",
      ({ user, params, set }) => {
        s.tokens.delete(user.id, params.id);
        set.status = 204;
      },
      { response: { 204: t.Void(), ...errorResponses(401, 404, 429) }, detail: detail("Delete a token; requests with it are refused at once") },
    );
