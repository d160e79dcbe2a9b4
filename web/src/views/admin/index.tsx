/**
 * Admin (shown to admin-role users): /admin/* opens with the operator's admin password (the
 * interface's rule), asked for here and kept in this page's memory only — never stored. Users
 * (role, disable: asked to confirm, and more plainly for yourself), run-time config (rate limit,
 * default concurrency, sign-up; a refused value's error next to its field), stats, failed
 * notifications.
 */
import { Alert } from "../../components/feedback.tsx";
import { THead } from "../../components/table.tsx";
import { useEffect, useState } from "preact/hooks";
import type { AdminNotificationRecord } from "../../../../src/schema/notification.ts";
import type { RuntimeSettings, StatsRecord } from "../../../../src/schema/admin.ts";
import type { AdminUser } from "../../../../src/schema/user.ts";
import { ApiError } from "../../lib/api.ts";
import { int, stamp } from "../../lib/format.ts";
import type { User } from "../../lib/session.ts";
import { Field, useFieldErrors } from "../profiles/fields.tsx";

let password = "";

async function admin<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${password}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new ApiError(data?.error ?? res.statusText, res.status, data?.code ?? "HTTP_ERROR", data?.details);
  return data as T;
}

function Unlock({ onUnlock }: { onUnlock: () => void }) {
  const [error, setError] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    password = String(new FormData(e.currentTarget as HTMLFormElement).get("password") ?? "");
    try {
      await admin("GET", "/admin/stats");
      onUnlock();
    } catch (err) {
      password = "";
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };
  return (
    <form class="card narrow" onSubmit={submit}>
      <h2>Admin password</h2>
      <p class="muted">The operator surface opens with the server's admin password (set with runcell admin set-password). It is kept in this page only.</p>
      <label>
        Admin password <input name="password" type="password" autocomplete="off" required />
      </label>
      <button type="submit" class="primary">
        Open
      </button>
      <p class="error" role="alert">
        {error}
      </p>
    </form>
  );
}

/** Why a change needs a confirmation (null: it does not). */
function risk(u: AdminUser, me: User, patch: { role?: string; disabled?: boolean }): string | null {
  const self = u.id === me.id;
  if (self && patch.role && patch.role !== "admin") return "Remove your own admin role? You lose the Admin page at once, and only another admin can give it back.";
  if (self && patch.disabled) return "Disable your own account? You are signed out at once and cannot sign in again until another admin enables you.";
  if (patch.disabled) return `Disable ${u.email}? Their sessions and sockets close, and their running work stops.`;
  return null;
}

function Users({ me }: { me: User }) {
  const [users, setUsers] = useState<AdminUser[]>([]);
  const [error, setError] = useState("");
  const load = () => admin<{ data: AdminUser[] }>("GET", "/admin/users?limit=100").then((r) => setUsers(r.data), (e) => setError(e.message));
  useEffect(() => void load(), []);
  const change = async (u: AdminUser, patch: { role?: string; disabled?: boolean }) => {
    const question = risk(u, me, patch);
    if (question && !confirm(question)) {
      setUsers([...users]); // the role picker shows the role again
      return;
    }
    await admin("PATCH", `/admin/users/${u.id}`, patch).catch((e) => setError(e.message));
    await load();
  };
  return (
    <section class="card" aria-labelledby="admin-users">
      <h2 id="admin-users">Users</h2>
      <Alert text={error} />
      <table>
        <THead columns={["Email", "Role", "Status", "Created"]} />
        <tbody>
          {users.map((u) => (
            <tr key={u.id}>
              <td>{u.email}</td>
              <td>
                <label>
                  <span class="sr-only">Role of {u.email}</span>
                  <select value={u.role} onChange={(e) => change(u, { role: (e.currentTarget as HTMLSelectElement).value })}>
                    <option value="user">user</option>
                    <option value="admin">admin</option>
                  </select>
                </label>
              </td>
              <td>
                <button type="button" class={u.disabled ? "" : "danger"} onClick={() => change(u, { disabled: !u.disabled })}>
                  {u.disabled ? "Enable" : "Disable"}
                </button>{" "}
                {u.disabled && <span class="error">disabled</span>}
              </td>
              <td {...stamp(u.created_at)} />
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function Config() {
  const [cfg, setCfg] = useState<RuntimeSettings | null>(null);
  const [msg, setMsg] = useState("");
  const f = useFieldErrors("cfg-");
  useEffect(() => void admin<RuntimeSettings>("GET", "/admin/config").then(setCfg, (e) => setMsg(e.message)), []);
  if (!cfg) return <Alert text={msg} />;
  const save = async (e: Event) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget as HTMLFormElement);
    setMsg("");
    f.clear();
    try {
      const next = await admin<RuntimeSettings>("PATCH", "/admin/config", {
        rate_limit: { per_minute: Number(data.get("per_minute")), burst: Number(data.get("burst")) },
        default_max_concurrency: Number(data.get("default_max_concurrency")),
        signup: data.get("signup"),
      });
      setCfg(next);
      setMsg("Saved: applied at once.");
    } catch (err) {
      f.fail(err);
    }
  };
  // Uncontrolled (defaultValue): a refused value stays as typed.
  return (
    <form class="card" onSubmit={save} aria-labelledby="admin-config">
      <h2 id="admin-config">Configuration</h2>
      {f.general}
      <div class="grid">
        <Field f={f} name="rate_limit.per_minute" label="Requests per minute per caller">
          {(p) => <input {...p} name="per_minute" type="number" min={1} defaultValue={String(cfg.rate_limit.per_minute)} />}
        </Field>
        <Field f={f} name="rate_limit.burst" label="Burst">
          {(p) => <input {...p} name="burst" type="number" min={1} defaultValue={String(cfg.rate_limit.burst)} />}
        </Field>
        <Field f={f} name="default_max_concurrency" label="Default concurrency per profile">
          {(p) => <input {...p} name="default_max_concurrency" type="number" min={1} max={1000} defaultValue={String(cfg.default_max_concurrency)} />}
        </Field>
        <Field f={f} name="signup" label="Sign-up">
          {(p) => (
            <select {...p} name="signup">
              <option value="closed" selected={cfg.signup === "closed"}>
                closed (operator creates accounts)
              </option>
              <option value="open" selected={cfg.signup === "open"}>
                open (anyone may sign up)
              </option>
            </select>
          )}
        </Field>
      </div>
      <button type="submit" class="primary">
        Save
      </button>{" "}
      <span role="status">{msg}</span>
    </form>
  );
}

function Stats() {
  const [s, setS] = useState<StatsRecord | null>(null);
  useEffect(() => void admin<StatsRecord>("GET", "/admin/stats").then(setS, () => {}), []);
  if (!s) return null;
  const rows: [string, number][] = [
    ["Users", s.users.total],
    ["Admins", s.users.admins],
    ["Disabled users", s.users.disabled],
    ["Profiles", s.profiles.total],
    ["Sessions", s.sessions.total],
    ["Tasks", s.tasks.total],
    ["Running workspaces", (s.workspaces as Record<string, number>).running ?? 0],
    ["Failed notifications", (s.notifications as Record<string, number>).failed ?? 0],
  ];
  return (
    <section class="card" aria-labelledby="admin-stats">
      <h2 id="admin-stats">Stats</h2>
      <p class="meta">
        runcell {s.version} ({s.commit}), up {int(Math.round(s.uptime_seconds / 60))} min
      </p>
      <dl class="stats">
        {rows.map(([k, v]) => (
          <div key={k}>
            <dt>{k}</dt>
            <dd>{int(v)}</dd>
          </div>
        ))}
      </dl>
    </section>
  );
}

function FailedNotifications() {
  const [rows, setRows] = useState<AdminNotificationRecord[] | null>(null);
  const [error, setError] = useState("");
  useEffect(() => void admin<{ data: AdminNotificationRecord[] }>("GET", "/admin/notifications?status=failed&limit=50").then((r) => setRows(r.data), (e) => setError(e.message)), []);
  return (
    <section class="card" aria-labelledby="admin-failed">
      <h2 id="admin-failed">Failed notifications</h2>
      <Alert text={error} />
      {rows === null ? null : rows.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <table>
          <THead columns={["When", "User", "Message", "Attempts", "Last error"]} />
          <tbody>
            {rows.map((n) => (
              <tr key={n.id}>
                <td {...stamp(n.created_at)} />
                <td>{n.user_id}</td>
                <td>{n.payload.message}</td>
                <td>{n.attempts}</td>
                <td class="error">{n.last_error}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function Admin({ me }: { me: User }) {
  const [open, setOpen] = useState(password !== "");
  if (!open) return <main id="main" tabIndex={-1} class="page"><h1>Admin</h1><Unlock onUnlock={() => setOpen(true)} /></main>;
  return (
    <main id="main" tabIndex={-1} class="page">
      <h1>Admin</h1>
      <Stats />
      <Users me={me} />
      <Config />
      <FailedNotifications />
    </main>
  );
}
