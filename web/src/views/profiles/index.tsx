/** Profiles: the list, a form to create one or edit one (every field the API accepts), deletion. */
import { Alert, EmptyRow } from "../../components/feedback.tsx";
import { THead } from "../../components/table.tsx";
import { useEffect, useState } from "preact/hooks";
import type { ProfileRecord } from "../../../../src/schema/profile.ts";
import type { SecretRecord } from "../../../../src/schema/secret.ts";
import { all, del } from "../../lib/api.ts";
import { ProfileForm } from "./form.tsx";

export function Profiles() {
  const [profiles, setProfiles] = useState<ProfileRecord[] | null>(null);
  const [secrets, setSecrets] = useState<string[]>([]);
  const [editing, setEditing] = useState<ProfileRecord | null>(null);
  const [status, setStatus] = useState("");
  const [formKey, setFormKey] = useState(0); // a new key empties the form after a save
  const [error, setError] = useState("");
  const load = () => all<ProfileRecord>("/v1/profiles").then(setProfiles, (e) => setError(String(e.message ?? e)));
  useEffect(() => {
    void load();
    // Secret names for the key and env pickers; the form works without them.
    all<SecretRecord>("/v1/secrets").then((s) => setSecrets(s.map((x) => x.name)), () => {});
  }, []);

  const edit = (p: ProfileRecord | null) => {
    setEditing(p);
    setStatus("");
    setTimeout(() => document.getElementById("pf-name")?.focus());
  };
  const saved = async (p: ProfileRecord, created: boolean) => {
    setEditing(null);
    setFormKey(formKey + 1);
    setStatus(created ? `Created the profile ${p.name}.` : `Saved the profile ${p.name}.`);
    await load();
  };
  const remove = async (p: ProfileRecord) => {
    if (!confirm(`Delete the profile "${p.name}"? Its sessions stay readable; its playbooks are disabled.`)) return;
    setError("");
    try {
      await del(`/v1/profiles/${p.id}`);
      if (editing?.id === p.id) setEditing(null);
      setStatus(`Deleted the profile ${p.name}.`);
    } catch (err) {
      setError((err as Error).message);
    }
    await load();
  };

  return (
    <main id="main" tabIndex={-1} class="page">
      <h1>Profiles</h1>
      <p role="status">{status}</p>
      <Alert text={error} />
      <table class="card">
        <caption class="sr-only">Your profiles</caption>
        <THead columns={["Name", "Model", "Image", "Network", "Tools", ""]} />
        <tbody>
          {profiles?.map((p) => (
            <tr key={p.id}>
              <td>{p.name}</td>
              <td>
                {p.model.provider} · {p.model.name}
              </td>
              <td>
                <code>{p.image}</code>
              </td>
              <td>{p.network}</td>
              <td>{p.tools.join(", ") || "none"}</td>
              <td>
                <div class="actions">
                  <button type="button" onClick={() => edit(p)} aria-label={`Edit ${p.name}`}>
                    Edit
                  </button>
                  <button type="button" class="danger" onClick={() => remove(p)} aria-label={`Delete ${p.name}`}>
                    Delete
                  </button>
                </div>
              </td>
            </tr>
          ))}
          {profiles?.length === 0 && (
            <EmptyRow cols={6}>No profiles yet.</EmptyRow>
          )}
        </tbody>
      </table>
      <ProfileForm key={`${editing?.id ?? "new"}-${formKey}`} profile={editing ?? undefined} secrets={secrets} onSaved={saved} onCancel={() => edit(null)} />
    </main>
  );
}
