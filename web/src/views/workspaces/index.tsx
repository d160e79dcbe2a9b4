/**
 * Workspaces: the user's session containers (/workspaces) and one workspace with a file browser
 * (/workspaces/:id): directories navigable (the folder is in the URL, `?path=`, so Back and links
 * work), files downloaded from the same-origin
 * /v1/workspaces/:id/files/<path>, images previewed inline.
 */
import { Alert, EmptyRow } from "../../components/feedback.tsx";
import { THead } from "../../components/table.tsx";
import { useEffect, useRef, useState } from "preact/hooks";
import type { ProfileRecord } from "../../../../src/schema/profile.ts";
import type { DirEntry, DirListing, WorkspaceRecord } from "../../../../src/schema/workspace.ts";
import { all, ApiError, del, get, type Page } from "../../lib/api.ts";
import { stamp } from "../../lib/format.ts";
import { linkTo, navigate, useQueryParam } from "../../lib/router.ts";
import "./workspaces.css";

const message = (e: unknown) => (e instanceof ApiError ? e.message : String(e));
const IMAGE = /\.(png|jpe?g|gif|webp|avif|bmp|ico|svg)$/i;

function bytes(n: number | null): string {
  if (n == null) return "—";
  const units = ["B", "KB", "MB", "GB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

/** The same-origin download URL of a file (each path segment encoded), or null if it would leave the origin. */
function fileUrl(id: string, path: string): string | null {
  const href = `/v1/workspaces/${encodeURIComponent(id)}/files/${path.split("/").map(encodeURIComponent).join("/")}`;
  return new URL(href, location.href).origin === location.origin ? href : null;
}

function Status({ w }: { w: WorkspaceRecord }) {
  return (
    <span class={`ws-status ws-${w.status}`} title={w.error ?? undefined}>
      {w.status}
    </span>
  );
}

function useProfiles() {
  const [names, setNames] = useState<Record<string, string>>({});
  useEffect(() => {
    all<ProfileRecord>("/v1/profiles").then(
      (l) => setNames(Object.fromEntries(l.map((p) => [p.id, p.name]))),
      () => {},
    );
  }, []);
  return names;
}

export function Workspaces() {
  const [list, setList] = useState<WorkspaceRecord[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState("");
  const profiles = useProfiles();
  const load = (after: string | null) =>
    get<Page<WorkspaceRecord>>(`/v1/workspaces?limit=50${after ? `&cursor=${encodeURIComponent(after)}` : ""}`).then(
      (p) => {
        setList((l) => (after && l ? [...l, ...p.data] : p.data));
        setCursor(p.next_cursor);
      },
      (e) => setError(message(e)),
    );
  useEffect(() => void load(null), []);

  return (
    <main id="main" tabIndex={-1} class="page">
      <h1>Workspaces</h1>
      <p class="muted">Each session runs in its own container with a persistent /workspace. Stopped workspaces start again on the session's next turn.</p>
      <Alert text={error} />
      <table class="card ws-list">
        <caption class="sr-only">Your workspaces, newest first</caption>
        <THead columns={["Workspace", "Status", "Profile", "Session", "Last active"]} />
        <tbody>
          {list?.map((w) => (
            <tr key={w.id}>
              <td>
                <a href={`/workspaces/${w.id}`} onClick={linkTo(`/workspaces/${w.id}`)} title={w.name}>
                  {w.id}
                </a>
              </td>
              <td>
                <Status w={w} />
              </td>
              <td>{profiles[w.profile_id] ?? <code>{w.profile_id}</code>}</td>
              <td>
                <a href={`/sessions/${w.session_id}`} onClick={linkTo(`/sessions/${w.session_id}`)}>
                  Open session
                </a>
              </td>
              <td {...stamp(w.last_active_at)} />
            </tr>
          ))}
          {list?.length === 0 && (
            <EmptyRow cols={5}>No workspaces yet: one is created with a session's first turn.</EmptyRow>
          )}
        </tbody>
      </table>
      {list === null && !error && <p class="muted">Loading…</p>}
      {cursor && (
        <button type="button" onClick={() => load(cursor)}>
          Load more workspaces
        </button>
      )}
    </main>
  );
}

export function WorkspaceDetail({ id }: { id: string }) {
  const [ws, setWs] = useState<WorkspaceRecord | null>(null);
  const dir = useQueryParam("path");
  /** The page of a folder of this workspace. */
  const folder = (path: string) => `/workspaces/${id}${path ? `?path=${encodeURIComponent(path)}` : ""}`;
  const folderLink = (path: string, label: string) => (
    <a href={folder(path)} onClick={linkTo(folder(path))}>
      {label}
    </a>
  );
  const [entries, setEntries] = useState<DirEntry[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [preview, setPreview] = useState<{ name: string; url: string } | null>(null);
  const [error, setError] = useState("");
  const [listError, setListError] = useState("");
  const profiles = useProfiles();
  const seq = useRef(0);

  useEffect(() => {
    get<WorkspaceRecord>(`/v1/workspaces/${encodeURIComponent(id)}`).then(setWs, (e) => setError(message(e)));
  }, [id]);
  const list = (path: string, after: string | null) => {
    const n = ++seq.current;
    setListError("");
    if (!after) setEntries(null);
    get<DirListing>(`/v1/workspaces/${encodeURIComponent(id)}/files?limit=200&path=${encodeURIComponent(path)}${after ? `&cursor=${encodeURIComponent(after)}` : ""}`).then(
      (l) => {
        if (n !== seq.current) return; // a later listing was asked for
        setEntries((e) => (after && e ? [...e, ...l.data] : l.data));
        setCursor(l.next_cursor);
      },
      (e) => {
        if (n !== seq.current) return;
        setEntries([]);
        setListError(message(e));
      },
    );
  };
  useEffect(() => {
    setPreview(null);
    list(dir, null);
  }, [id, dir]);

  const remove = async () => {
    if (!ws || !confirm(`Remove the workspace ${ws.name}? Its container and every file in /workspace are deleted; the session keeps its transcript.`)) return;
    try {
      await del(`/v1/workspaces/${encodeURIComponent(id)}`);
      navigate("/workspaces");
    } catch (e) {
      setError(message(e));
    }
  };

  const parts = dir ? dir.split("/") : [];
  const crumbs: [string, string][] = [["/workspace", ""], ...parts.map((p, i): [string, string] => [p, parts.slice(0, i + 1).join("/")])];

  return (
    <main id="main" tabIndex={-1} class="page">
      <p>
        <a href="/workspaces" onClick={linkTo("/workspaces")}>
          ← All workspaces
        </a>
      </p>
      <h1 class="ws-title">{ws?.name ?? id}</h1>
      <Alert text={error} />
      {ws && (
        <dl class="card grid ws-facts">
          <div>
            <dt>Status</dt>
            <dd>
              <Status w={ws} />
              {ws.error && <span class="meta"> {ws.error}</span>}
            </dd>
          </div>
          <div>
            <dt>Profile</dt>
            <dd>{profiles[ws.profile_id] ?? <code>{ws.profile_id}</code>}</dd>
          </div>
          <div>
            <dt>Session</dt>
            <dd>
              <a href={`/sessions/${ws.session_id}`} onClick={linkTo(`/sessions/${ws.session_id}`)}>
                Open session
              </a>
            </dd>
          </div>
          <div>
            <dt>Image</dt>
            <dd>
              <code>{ws.image}</code>
            </dd>
          </div>
          <div>
            <dt>Last active</dt>
            <dd {...stamp(ws.last_active_at)} />
          </div>
          <div>
            <dt>Created</dt>
            <dd {...stamp(ws.created_at)} />
          </div>
        </dl>
      )}

      {!error && (
        <>
          <h2>Files</h2>
          <nav aria-label="Folder" class="ws-crumbs">
            {crumbs.map(([label, path], i) =>
              i === crumbs.length - 1 ? (
                <span key={path} aria-current="location">
                  {label}
                </span>
              ) : (
                <span key={path}>
                  {folderLink(path, label)}/
                </span>
              ),
            )}
          </nav>
          <Alert text={listError} />
          <table class="card ws-files" data-testid="workspace-files">
            <caption class="sr-only">Contents of /workspace{dir ? `/${dir}` : ""}</caption>
            <THead columns={["Name", "Size", "Modified", ""]} />
            <tbody>
              {dir && (
                <tr>
                  <td colSpan={4}>
                    {folderLink(parts.slice(0, -1).join("/"), ".. (parent folder)")}
                  </td>
                </tr>
              )}
              {entries?.map((e) => {
                const url = e.type === "file" || e.type === "symlink" ? fileUrl(id, e.path) : null;
                return (
                  <tr key={e.path}>
                    <td>
                      {e.type === "dir" ? (
                        folderLink(e.path, `${e.name}/`)
                      ) : url ? (
                        <a href={url} download={e.name}>
                          {e.name}
                        </a>
                      ) : (
                        e.name
                      )}
                      {e.type === "symlink" && <span class="meta"> (link)</span>}
                    </td>
                    <td>{e.type === "dir" ? "—" : bytes(e.size)}</td>
                    <td {...stamp(e.modified)} />
                    <td>
                      {url && IMAGE.test(e.name) && (
                        <button type="button" aria-label={`Preview ${e.name}`} onClick={() => setPreview({ name: e.name, url })}>
                          Preview
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
              {entries?.length === 0 && !listError && (
                <EmptyRow cols={4}>This folder is empty.</EmptyRow>
              )}
            </tbody>
          </table>
          {entries === null && <p class="muted">Loading files… (a stopped workspace starts first)</p>}
          {cursor && (
            <button type="button" onClick={() => list(dir, cursor)}>
              Load more files
            </button>
          )}
        </>
      )}
      {preview && (
        <figure class="card ws-preview">
          <img src={preview.url} alt={preview.name} />
          <figcaption class="row">
            <span class="grow">{preview.name}</span>
            <button type="button" onClick={() => setPreview(null)}>
              Close preview
            </button>
          </figcaption>
        </figure>
      )}
      {ws && (
        <p>
          <button type="button" class="danger" onClick={remove}>
            Remove workspace
          </button>
        </p>
      )}
    </main>
  );
}
