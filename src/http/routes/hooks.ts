/**
 * POST /hooks/playbooks/<pb_id>/<secret>: runs a playbook from outside (CI, cron elsewhere, a
 * form). No credential: the secret in the path is one. A wrong secret, an unknown or a disabled
 * playbook answer the same 404, whatever the body. Rate-limited per client address (the pipeline)
 * and, once the secret matched, per playbook (here).
 *
 * Credentials before content, as on /v1: the router leaves this route's body unread (`ownBody`),
 * and it is read only after the secret matched — at most 1 MiB like every JSON body (API.md; a
 * larger Content-Length is refused unread, a longer chunked body is cut off there: 413), then its
 * type, encoding, JSON and fields (400; `input` itself holds at most 64 KiB, INPUT_MAX_BYTES).
 * A caller without the secret makes the server read nothing of its body.
 */
import { Elysia, t } from "elysia";
import { Errors } from "../../lib/errors.ts";
import { closed } from "../../schema/common.ts";
import { HookAccepted, RunBody, type RunInput } from "../../schema/playbook.ts";
import { check } from "../../schema/validate.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { MAX_JSON_BODY, parseJsonBody } from "../parse.ts";
import { routeOptions } from "../route-options.ts";
import { errorResponses } from "../schema.ts";

const Body = closed(RunBody);

/** The body, read and checked like any route's JSON body (an empty one, or JSON null: none). */
async function readBody(request: Request): Promise<RunInput | null> {
  const value = await parseJsonBody(request, MAX_JSON_BODY);
  return value === undefined || value === null ? null : check(Body, value);
}

export const hookRoutes = (s: Services) =>
  new Elysia({ prefix: "/hooks/playbooks" }).use(routeOptions).post(
    "/:id/:secret",
    async ({ params, set, request }) => {
      const row = await s.playbooks.authorizeTrigger(params.id, params.secret);
      // The playbook's bucket is charged only once the secret matched: a playbook's id is no secret
      // (notifications, logs, task records), and wrong guesses are the client address's to pay for.
      const rl = s.limiter.take(`hook:${row.id}`);
      // The RateLimit-* headers report the bucket nearer to refusing: the 429 the one that refused.
      const ctx = requestContext(request);
      if (!rl.ok || ctx.rl === null || rl.remaining < ctx.rl.remaining) ctx.rl = rl;
      if (!rl.ok) throw Errors.rateLimited(rl.retryAfterSec, "Too many triggers of this playbook");
      const body = await readBody(request);
      const r = await s.playbooks.trigger(row, body?.input);
      set.status = 202;
      return r;
    },
    {
      // The body is read by readBody, only once the secret matched: the router leaves it unread.
      ownBody: true,
      // Documents the body; the null the router hands in is all Elysia checks (readBody checks the real one).
      body: t.Union([Body, t.Null()]),
      response: { 202: HookAccepted, ...errorResponses(400, 404, 413, 429, 502) },
      detail: {
        tags: ["Playbooks"],
        summary: "Run a playbook from its trigger URL (the URL is the credential)",
        description: "The URL comes from the playbook's trigger_url. Optional JSON body {input} (the body at most 1 MiB, its input at most 64 KiB). A wrong secret, an unknown or a disabled playbook all answer 404, whatever the body (it is read only once the secret matched).",
        security: [],
      },
    },
  );
