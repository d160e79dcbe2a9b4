/**
 * POST /hooks/playbooks/<pb_id>/<secret>: runs a playbook from outside (CI, cron elsewhere, a
 * form). No credential: the secret in the path is one. A wrong secret, an unknown or a disabled
 * playbook answer the same 404. Rate-limited per client address (the pipeline) and, once the secret
 * matched, per playbook (here), with a body of at most 64 KiB (the router's parser).
 */
import { Elysia } from "elysia";
import { Errors } from "../../lib/errors.ts";
import { HookAccepted, RunBody } from "../../schema/playbook.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { errorResponses, jsonBody } from "../schema.ts";

export const hookRoutes = (s: Services) =>
  new Elysia({ prefix: "/hooks/playbooks" }).post(
    "/:id/:secret",
    async ({ params, body, set, request }) => {
      const row = await s.playbooks.authorizeTrigger(params.id, params.secret);
      // The playbook's bucket is charged only once the secret matched: a playbook's id is no secret
      // (notifications, logs, task records), and wrong guesses are the client address's to pay for.
      const rl = s.limiter.take(`hook:${row.id}`);
      if (!rl.ok) {
        // The 429 reports the bucket that refused it, not the caller's address's.
        requestContext(request).rl = rl;
        throw Errors.rateLimited(rl.retryAfterSec, "Too many triggers of this playbook");
      }
      const r = await s.playbooks.trigger(row, body?.input);
      set.status = 202;
      return r;
    },
    {
      ...jsonBody(RunBody, { optional: true }),
      response: { 202: HookAccepted, ...errorResponses(400, 404, 413, 415, 429, 502) },
      detail: {
        tags: ["Playbooks"],
        summary: "Run a playbook from its trigger URL (the URL is the credential)",
        description: "The URL comes from the playbook's trigger_url. Optional JSON body {input} (at most 64 KiB). A wrong secret, an unknown or a disabled playbook all answer 404.",
        security: [],
      },
    },
  );
