/**
 * Sign in: email and password, or a configured OAuth provider; the setup hint on a new server.
 * When the server's sign-up is open (`--signup open`, told by /api/auth/providers), a link to the
 * sign-up form (name, email, password) instead.
 * `expired`: the page was signed out under the user (another tab, an expired session).
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, get, post } from "../../lib/api.ts";

export function SignIn({ expired = false }: { expired?: boolean }) {
  const [setupRequired, setSetupRequired] = useState(false);
  const [providers, setProviders] = useState<string[]>([]);
  const [signupOpen, setSignupOpen] = useState(false);
  const [signingUp, setSigningUp] = useState(false);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const password = useRef<HTMLInputElement>(null);

  useEffect(() => {
    get<{ setup_required: boolean }>("/api/auth/setup").then((s) => setSetupRequired(s.setup_required), () => {});
    get<{ providers: string[]; signup?: string }>("/api/auth/providers").then((p) => {
      setProviders(p.providers);
      setSignupOpen(p.signup === "open");
    }, () => {});
  }, []);

  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    setBusy(true);
    setError("");
    try {
      if (signingUp) await post("/api/auth/sign-up/email", { name: f.get("name") || undefined, email: f.get("email"), password: f.get("password") });
      else await post("/api/auth/sign-in/email", { email: f.get("email"), password: f.get("password") });
      location.assign(location.pathname + location.search);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
      setBusy(false);
      // Try again: the password field, selected (the button was disabled meanwhile and lost the focus).
      setTimeout(() => password.current?.select());
    }
  };

  const social = async (provider: string) => {
    try {
      const r = await post<{ url: string }>("/api/auth/sign-in/social", { provider, callbackURL: location.pathname + location.search });
      location.assign(r.url);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };

  return (
    <main id="main" tabIndex={-1} class="center">
      <form class="card narrow" onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">{signingUp ? "Create an account" : "Sign in"}</h1>
        {expired && (
          <p class="notice" role="alert">
            You were signed out (in another tab, or your session expired). Sign in again to continue: an unsent message is kept.
          </p>
        )}
        {setupRequired && (
          <p class="muted">
            This server has no account yet. Open the one-time setup link printed in the server's log (<code>/setup#…</code>), or run <code>runcell admin create-user</code>.
          </p>
        )}
        {signingUp && (
          <label>
            Name (optional) <input name="name" autocomplete="name" maxLength={200} />
          </label>
        )}
        <label>
          Email <input name="email" type="email" autocomplete={signingUp ? "email" : "username"} required />
        </label>
        <label>
          Password <input ref={password} name="password" type="password" autocomplete={signingUp ? "new-password" : "current-password"} required minLength={8} />
        </label>
        <button type="submit" class="primary" disabled={busy}>
          {signingUp ? "Create account" : "Sign in"}
        </button>
        {signupOpen && (
          <p class="muted">
            {signingUp ? "Have an account? " : "New here? "}
            <button
              type="button"
              class="link"
              onClick={() => {
                setSigningUp(!signingUp);
                setError("");
              }}
            >
              {signingUp ? "Sign in" : "Create an account"}
            </button>
          </p>
        )}
        {!signingUp && providers.map((p) => (
          <button type="button" key={p} onClick={() => social(p)}>
            Sign in with {p === "github" ? "GitHub" : "Google"}
          </button>
        ))}
        <p class="error" role="alert">
          {error}
        </p>
      </form>
    </main>
  );
}
