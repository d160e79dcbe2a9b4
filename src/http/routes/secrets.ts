/** /v1/secrets: the encrypted vault. Values go in and never come out through the API. */
import { Elysia, t } from "elysia";
import { createSelectSchema } from "drizzle-typebox";
import { secrets } from "../../db/schema.ts";
import type { Services } from "../../services.ts";
import { checkSecretName, checkSecretValue, SECRET_VALUE_MAX_BYTES } from "../../vault/names.ts";
import { requirePrincipal, USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, jsonBody, ListOf, PageQuery, Timestamp } from "../schema.ts";

/** The listed record: the drizzle row's columns without owner and ciphertext, times as ISO strings. */
const { name: nameColumn } = createSelectSchema(secrets).properties;
const SecretRecord = t.Object({ name: nameColumn, created_at: Timestamp, updated_at: Timestamp }, { title: "Secret" });
const PutBody = t.Object({ value: t.String({ description: `The secret (1 to ${SECRET_VALUE_MAX_BYTES} bytes); write-only` }) });
const NameParam = t.Object({ name: t.String({ description: "Secret name: 1–64 letters, digits, underscores; not starting with a digit", examples: ["GITHUB_TOKEN"] }) });
const detail = (summary: string, description?: string) => ({ tags: ["Secrets"], summary, description, security: USER_SECURITY });

export const secretRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/secrets" })
    .use(userGuard())
    .put(
      "/:name",
      ({ user, params, body, set }) => {
        s.secrets.put(user.id, params.name, body.value);
        set.status = 204;
      },
      {
        params: NameParam,
        body: PutBody,
        parse: "json",
        transform({ body, params, request }) {
          requirePrincipal(request);
          checkSecretName(params.name, "name");
          jsonBody(PutBody).transform({ body });
          checkSecretValue((body as { value?: unknown } | null)?.value);
        },
        response: { 204: t.Void(), ...errorResponses(400, 401, 413, 429) },
        detail: detail("Create or replace a secret", "Encrypted at rest (AES-256-GCM). The value is never returned, logged or put in events."),
      },
    )
    .get("/", ({ user, query }) => s.secrets.list(user.id, query), {
      query: t.Object(PageQuery),
      response: { 200: ListOf(SecretRecord), ...errorResponses(400, 401, 429) },
      detail: detail("List your secrets (names and times, never values), newest first"),
    })
    .delete(
      "/:name",
      ({ user, params, set }) => {
        s.secrets.delete(user.id, params.name);
        set.status = 204;
      },
      { params: NameParam, response: { 204: t.Void(), ...errorResponses(400, 401, 404, 429) }, detail: detail("Delete a secret") },
    );
