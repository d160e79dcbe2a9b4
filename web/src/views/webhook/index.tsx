/**
 * Webhook: the user's one outbound integration (POST /v1/integrations upserts it), its signing
 * secret (generated here, shown once: the API never returns it), a test notification and the
 * recent deliveries (GET /v1/notifications), polled while any is still pending.
 */
import { Alert, EmptyRow } from "../../components/feedback.tsx";
import { THead } from "../../components/table.tsx";
import { useEffect, useState } from "preact/hooks";
import type { IntegrationRecord } from "../../../../src/schema/integration.ts";
import type { NotificationRecord } from "../../../../src/schema/notification.ts";
import { all, ApiError, del, get, type Page, post } from "../../lib/api.ts";
import { stamp } from "../../lib/format.ts";
import { CopyButton } from "../profiles/fields.tsx";

const message = (e: unknown) => (e instanceof ApiError ? e.message : String(e));

/** 32 random bytes as hex: the HMAC key for X-Service-Signature. */
function newSecret(): string {
  const b = crypto.getRandomValues(new Uint8Array(32));
  return "whsec_" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

export function Webhook() {
  const [hook, setHook] = useState<IntegrationRecord | null | undefined>(undefined);
  const [freshSecret, setFreshSecret] = useState("");
  const [deliveries, setDeliveries] = useState<NotificationRecord[] | null>(null);
  const [status, setStatus] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);

  const loadHook = () => all<IntegrationRecord>("/v1/integrations").then((l) => setHook(l.find((i) => i.type === "webhook") ?? null), (e) => setError(message(e)));
  const loadDeliveries = () => get<Page<NotificationRecord>>("/v1/notifications?limit=20").then((p) => setDeliveries(p.data), (e) => setError(message(e)));
  useEffect(() => {
    void loadHook();
    void loadDeliveries();
  }, []);
  // Delivery is asynchronous (retries after 5 s and 15 s): follow pending rows until they settle.
  const pending = !!deliveries?.some((d) => d.status === "pending");
  useEffect(() => {
    if (!pending) return;
    const t = setInterval(loadDeliveries, 3000);
    return () => clearInterval(t);
  }, [pending]);

  const run = async (fn: () => Promise<string | void>) => {
    setError("");
    setStatus("");
    setBusy(true);
    try {
      const done = await fn();
      if (done) setStatus(done);
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(false);
    }
  };
  /** Creates or replaces the webhook; the API keeps no secret unless one is sent, so signing means a new one. */
  const upsert = (url: string, sign: boolean) =>
    run(async () => {
      const secret = sign ? newSecret() : undefined;
      const r = await post<IntegrationRecord>("/v1/integrations", { type: "webhook", config: { url, secret } });
      setHook(r);
      setFreshSecret(secret ?? "");
      return secret ? "Webhook saved with a new signing secret." : "Webhook saved; deliveries are not signed.";
    });
  const save = (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    void upsert(String(f.get("url") ?? "").trim(), f.get("sign") === "on");
  };
  const remove = () => {
    if (!hook || !confirm("Delete the webhook? Notifications still waiting to be delivered end as failed.")) return;
    void run(async () => {
      await del(`/v1/integrations/${hook.id}`);
      setHook(null);
      setFreshSecret("");
      await loadDeliveries();
      return "Webhook deleted.";
    });
  };
  const test = (e: Event) => {
    e.preventDefault();
    const text = String(new FormData(e.currentTarget as HTMLFormElement).get("message") ?? "");
    void run(async () => {
      const q = await post<{ id: string }>("/v1/notifications", { message: text });
      await loadDeliveries();
      return `Test notification ${q.id} queued.`;
    });
  };

  return (
    <main id="main" tabIndex={-1} class="page">
      <h1>Webhook</h1>
      <p class="muted">
        Agents and the platform POST notifications to this URL. With a signing secret each delivery carries{" "}
        <code>X-Service-Signature: t=…,v1=…</code> (HMAC-SHA256 of <code>t.body</code>).
      </p>
      {hook === undefined ? (
        error ? (
          <button type="button" onClick={loadHook}>
            Load the webhook again
          </button>
        ) : (
          <p class="muted">Loading…</p>
        )
      ) : (
        <form class="card" onSubmit={save} aria-labelledby="webhook-form" key={hook?.updated_at ?? "new"}>
          <h2 id="webhook-form">{hook ? "Your webhook" : "Set up a webhook"}</h2>
          {hook && (
            <p class="meta">
              {hook.config.has_secret ? "Signed deliveries" : "Unsigned deliveries"} · updated <span {...stamp(hook.updated_at)} />
            </p>
          )}
          <label>
            URL <input name="url" type="url" required maxLength={2048} defaultValue={hook?.config.url ?? ""} placeholder="https://example.com/hooks/runcell" />
          </label>
          <label>
            <input type="checkbox" name="sign" defaultChecked={hook ? hook.config.has_secret : true} style="width:auto;margin:0 6px 0 0;vertical-align:middle" />
            Sign deliveries (saving generates a new secret; the current one stops working)
          </label>
          <div class="row">
            <button type="submit" class="primary" disabled={busy}>
              {hook ? "Save webhook" : "Create webhook"}
            </button>
            {hook && (
              <>
                <button type="button" disabled={busy} onClick={() => upsert(hook.config.url, true)}>
                  {hook.config.has_secret ? "Rotate signing secret" : "Add a signing secret"}
                </button>
                <button type="button" class="danger" disabled={busy} onClick={remove}>
                  Delete webhook
                </button>
              </>
            )}
          </div>
        </form>
      )}
      {freshSecret && (
        <div class="card notice">
          <p>Your signing secret — copy it to the receiver now, it is not shown again:</p>
          <p class="row">
            <code class="secret" data-testid="webhook-secret">
              {freshSecret}
            </code>
            <CopyButton text={freshSecret} />
          </p>
        </div>
      )}
      <p role="status">{status}</p>
      <Alert text={error} />
      <form class="card row" onSubmit={test}>
        <label class="grow" style="min-width:14em">
          Test message <input name="message" required maxLength={4000} defaultValue="Test notification from the runcell dashboard" />
        </label>
        <button type="submit" disabled={busy}>
          Send test notification
        </button>
      </form>
      <div class="row">
        <h2 class="grow">Recent deliveries</h2>
        <button type="button" onClick={loadDeliveries}>
          Refresh
        </button>
      </div>
      <table class="card" data-testid="deliveries" tabIndex={0}>
        <caption class="sr-only">Recent notifications and their delivery state, newest first</caption>
        <THead columns={["Status", "Message", "Attempts", "Last error", "Created", "Delivered"]} />
        <tbody>
          {deliveries?.map((d) => (
            <tr key={d.id}>
              <td class={d.status === "failed" ? "error" : d.status === "pending" ? "muted" : undefined}>{d.status}</td>
              <td>
                {d.payload.message.length > 120 ? `${d.payload.message.slice(0, 120)}…` : d.payload.message}
                <span class="meta"> · {d.payload.source}</span>
              </td>
              <td>{d.attempts}</td>
              <td>{d.last_error ?? "—"}</td>
              <td {...stamp(d.created_at)} />
              <td {...stamp(d.delivered_at)} />
            </tr>
          ))}
          {deliveries?.length === 0 && (
            <EmptyRow cols={6}>No notifications yet.</EmptyRow>
          )}
        </tbody>
      </table>
    </main>
  );
}
