/**
 * First-run setup (/setup#<token>): creates the first (admin) account with the one-time link that
 * `runcell serve` printed. The token lives only in the URL fragment, which browsers never send;
 * it is removed from the address bar as soon as it is read. A link pasted into a tab already on
 * /setup changes only the fragment (no reload): the token is read then too.
 */
import { useEffect, useState } from "preact/hooks";
import { ApiError, post } from "../../lib/api.ts";

const readToken = () => {
  let token = "";
  try {
    token = decodeURIComponent(location.hash.replace(/^#/, ""));
  } catch {
    token = "";
  }
  if (location.hash) history.replaceState(null, "", location.pathname);
  return token;
};

export function Setup() {
  const [token, setToken] = useState(readToken);
  useEffect(() => {
    const onHash = () => {
      const t = readToken();
      if (t) setToken(t);
    };
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, []);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const name = String(f.get("name") ?? "").trim();
    setBusy(true);
    setError("");
    try {
      await post("/api/auth/setup", { token, email: f.get("email"), name: name || undefined, password: f.get("password") });
      location.replace("/");
    } catch (err) {
      setError(err instanceof ApiError ? err.message : `Could not reach the server: ${String(err)}`);
      setBusy(false);
    }
  };

  return (
    <main id="main" tabIndex={-1} class="center">
      <div class="card narrow">
        <h1>Set up runcell</h1>
        {token ? (
          <form onSubmit={submit}>
            <p class="muted">Create the first account. It gets the admin role.</p>
            <label>
              Email <input name="email" type="email" autocomplete="username" required maxLength={254} />
            </label>
            <label>
              Name (optional) <input name="name" autocomplete="name" maxLength={200} />
            </label>
            <label>
              Password <input name="password" type="password" autocomplete="new-password" required minLength={8} maxLength={256} aria-describedby="pw-hint" />
            </label>
            <p id="pw-hint" class="meta">
              8 to 256 characters.
            </p>
            <button type="submit" class="primary" disabled={busy}>
              Create account and sign in
            </button>
            <p class="error" role="alert">
              {error}
            </p>
          </form>
        ) : (
          <div id="missing">
            <p>
              This page needs the one-time link that <code>runcell serve</code> printed when it started (<code>…/setup#…</code>). Copy the whole link,
              including the part after <code>#</code>.
            </p>
            <p class="meta">
              No link, or it expired? Restart <code>runcell serve</code> to print a new one, or create the account from the command line:{" "}
              <code>runcell admin create-user --email you@example.com --role admin</code>.
            </p>
          </div>
        )}
      </div>
    </main>
  );
}
