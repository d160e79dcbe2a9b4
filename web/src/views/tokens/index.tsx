/** API tokens: create (shown once, with a copy button), list with last use, revoke. */
import { Alert, EmptyRow } from "../../components/feedback.tsx";
import { THead } from "../../components/table.tsx";
import { useEffect, useState } from "preact/hooks";
import { all, ApiError, del, post } from "../../lib/api.ts";
import { ago, stamp } from "../../lib/format.ts";
import { CopyButton } from "../profiles/fields.tsx";

interface Token {
  id: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
}

export function Tokens() {
  const [tokens, setTokens] = useState<Token[] | null>(null);
  const [fresh, setFresh] = useState<{ name: string; token: string } | null>(null);
  const [error, setError] = useState("");
  const load = () => all<Token>("/v1/api-tokens").then(setTokens, (e) => setError(String(e.message ?? e)));
  useEffect(() => void load(), []);

  const create = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const name = String(new FormData(form).get("name") ?? "").trim();
    setError("");
    try {
      const r = await post<{ token: string; name: string }>("/v1/api-tokens", { name });
      setFresh({ name: r.name, token: r.token });
      form.reset();
      await load();
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };
  const revoke = async (t: Token) => {
    if (!confirm(`Revoke the token "${t.name}"? Scripts using it stop working at once.`)) return;
    await del(`/v1/api-tokens/${t.id}`).catch((err) => setError(err.message));
    await load();
  };

  return (
    <main id="main" tabIndex={-1} class="page">
      <h1>API tokens</h1>
      <form class="card row" onSubmit={create}>
        <label class="grow">
          Token name <input name="name" placeholder="e.g. laptop" required maxLength={100} />
        </label>
        <button type="submit" class="primary">
          Create API token
        </button>
      </form>
      {fresh && (
        <div class="card notice" role="status">
          <p>
            Your new token <strong>{fresh.name}</strong> — copy it now, it is not shown again:
          </p>
          <p class="row">
            <code class="secret" data-testid="new-token">
              {fresh.token}
            </code>
            <CopyButton text={fresh.token} />
          </p>
        </div>
      )}
      <Alert text={error} />
      <table class="card">
        <caption class="sr-only">Your API tokens</caption>
        <THead columns={["Name", "Created", "Last used", ""]} />
        <tbody>
          {tokens?.map((t) => (
            <tr key={t.id}>
              <td>{t.name}</td>
              <td {...stamp(t.created_at)} />
              <td>{t.last_used_at ? ago(t.last_used_at) : "never"}</td>
              <td>
                <button type="button" class="danger" onClick={() => revoke(t)} aria-label={`Revoke ${t.name}`}>
                  Revoke
                </button>
              </td>
            </tr>
          ))}
          {tokens?.length === 0 && (
            <EmptyRow cols={4}>No tokens yet.</EmptyRow>
          )}
        </tbody>
      </table>
    </main>
  );
}
