/**
 * Admin (shown to admin-role users): /admin/* opens with the operator's admin password (the
 * interface's rule), asked for here and kept in this page's memory only — never stored. Users
 * (role, disable), run-time config (rate limit, default concurrency, sign-up), stats, failed
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

function Users() {
  const [users, setUsers] = useState<AdminUser[]>([]);
  const [error, setError] = useState("");
  const load = () => admin<{ data: AdminUser[] }>("GET", "/admin/users?limit=100").then((r) => setUsers(r.data), (e) => setError(e.message));
  useEffect(() => void load(), []);
  const change = async (u: AdminUser, patch: { role?: string; disabled?: boolean }) => {
    if (patch.disabled && !confirm(`Disable ${u.email}? Their sessions and sockets close, and their running work stops.`)) return;
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
  useEffect(() => void admin<RuntimeSettings>("GET", "/admin/config").then(setCfg, (e) => setMsg(e.message)), []);
  if (!cfg) return null;
  const save = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    try {
      const next = await admin<RuntimeSettings>("PATCH", "/admin/config", {
        rate_limit: { per_minute: Number(f.get("per_minute")), burst: Number(f.get("burst")) },
        default_max_concurrency: Number(f.get("default_max_concurrency")),
        signup: f.get("signup"),
      });
      setCfg(next);
      setMsg("Saved: applied at once.");
    } catch (err) {
      setMsg(err instanceof ApiError ? `${err.field ?? ""} ${err.message}` : String(err));
    }
  };
  return (
    <form class="card" onSubmit={save} aria-labelledby="admin-config">
      <h2 id="admin-config">Configuration</h2>
      <div class="grid">
        <label>
          Requests per minute per caller <input name="per_minute" type="number" min={1} value={cfg.rate_limit.per_minute} />
        </label>
        <label>
          Burst <input name="burst" type="number" min={1} value={cfg.rate_limit.burst} />
        </label>
        <label>
          Default concurrency per profile <input name="default_max_concurrency" type="number" min={1} max={1000} value={cfg.default_max_concurrency} />
        </label>
        <label>
          Sign-up
          <select name="signup" value={cfg.signup}>
            <option value="closed">closed (operator creates accounts)</option>
            <option value="open">open (anyone may sign up)</option>
          </select>
        </label>
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
  const [rows, setRows] = useState<AdminNotificationRecord[]>([]);
  useEffect(() => void admin<{ data: AdminNotificationRecord[] }>("GET", "/admin/notifications?status=failed&limit=50").then((r) => setRows(r.data), () => {}), []);
  return (
    <section class="card" aria-labelledby="admin-failed">
      <h2 id="admin-failed">Failed notifications</h2>
      {rows.length === 0 ? (
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

export function Admin() {
  const [open, setOpen] = useState(password !== "");
  if (!open) return <main class="page"><h1>Admin</h1><Unlock onUnlock={() => setOpen(true)} /></main>;
  return (
    <main class="page">
      <h1>Admin</h1>
      <Stats />
      <Users />
      <Config />
      <FailedNotifications />
    </main>
  );
}
