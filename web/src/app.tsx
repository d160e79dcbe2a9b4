/** The shell: who is signed in, the navigation, and the view for the current path. */
import { useEffect, useState } from "preact/hooks";
import { Alert, SlowDown } from "./components/feedback.tsx";
import { ApiError } from "./lib/api.ts";
import { linkTo, usePath } from "./lib/router.ts";
import { currentUser, signOut, type User } from "./lib/session.ts";
import { useStatus } from "./lib/status.ts";
import { Admin } from "./views/admin/index.tsx";
import { Chat } from "./views/chat/index.tsx";
import { Docs } from "./views/docs/index.tsx";
import { PlaybookDetail, Playbooks } from "./views/playbooks/index.tsx";
import { Profiles } from "./views/profiles/index.tsx";
import { Secrets } from "./views/secrets/index.tsx";
import { Setup } from "./views/setup/index.tsx";
import { SignIn } from "./views/signin/index.tsx";
import { Tokens } from "./views/tokens/index.tsx";
import { Usage } from "./views/usage/index.tsx";
import { Webhook } from "./views/webhook/index.tsx";
import { WorkspaceDetail, Workspaces } from "./views/workspaces/index.tsx";

/** The dashboard's pages; `/operator` is the admin view (`/admin` is the operator API's prefix). */
const NAV: [string, string][] = [
  ["/", "Sessions"],
  ["/profiles", "Profiles"],
  ["/playbooks", "Playbooks"],
  ["/workspaces", "Workspaces"],
  ["/secrets", "Secrets"],
  ["/webhook", "Webhook"],
  ["/usage", "Usage"],
  ["/tokens", "API tokens"],
];

const PAGES: Record<string, () => preact.JSX.Element> = {
  "/profiles": () => <Profiles />,
  "/playbooks": () => <Playbooks />,
  "/workspaces": () => <Workspaces />,
  "/secrets": () => <Secrets />,
  "/webhook": () => <Webhook />,
  "/usage": () => <Usage />,
  "/tokens": () => <Tokens />,
};

/** The tab's title for a page: "Profiles · runcell" (a screen reader says it, the history lists it); /operator is "Not found" but for an admin. */
function titleOf(path: string, signIn: boolean, admin: boolean): string {
  if (path === "/setup") return "Set up";
  if (path === "/docs") return "API docs";
  if (signIn) return "Sign in";
  const detail = /^\/(sessions|playbooks|workspaces)\//.exec(path)?.[1];
  if (detail) return { sessions: "Session", playbooks: "Playbook", workspaces: "Workspace" }[detail]!;
  if (path === "/operator") return admin ? "Admin" : "Not found";
  return NAV.find(([href]) => href === path)?.[1] ?? "Not found";
}
const useTitle = (title: string) => useEffect(() => void (document.title = `${title} · runcell`), [title]);

function route(path: string, user: User) {
  const detail = /^\/(sessions|playbooks|workspaces)\/([A-Za-z0-9_]+)$/.exec(path);
  if (detail?.[1] === "sessions") return <Chat sessionId={detail[2]!} />;
  if (detail?.[1] === "playbooks") return <PlaybookDetail id={detail[2]!} />;
  if (detail?.[1] === "workspaces") return <WorkspaceDetail id={detail[2]!} />;
  if (path === "/") return <Chat sessionId={null} />;
  if (path === "/operator" && user.role === "admin") return <Admin me={user} />;
  const page = PAGES[path];
  if (page) return page();
  return (
    <main id="main" tabIndex={-1} class="page">
      <h1>Not found</h1>
      <p>
        There is no page at <code>{path}</code>.{" "}
        <a href="/" onClick={linkTo("/")}>
          Back to your sessions
        </a>
      </p>
    </main>
  );
}

/** The skip link: the focus moves to the page's main region (every view has one, `#main`), the URL stays. */
function skipToMain(e: Event) {
  e.preventDefault();
  document.querySelector<HTMLElement>("#main")?.focus();
}

function Brand() {
  return (
    <a class="brand" href="/" onClick={linkTo("/")}>
      runcell
    </a>
  );
}

export function App() {
  const path = usePath();
  const { signedOut } = useStatus();
  const [user, setUser] = useState<User | null | undefined>(undefined);
  // (While who is signed in loads, /operator is taken for the admin page it is to them.)
  useTitle(titleOf(path, user === null || signedOut, user === undefined || user?.role === "admin"));
  // Public pages: no session needed (and none is asked for).
  if (path === "/setup") return <Setup />;
  if (path === "/docs")
    return (
      <>
        <header class="top">
          <Brand />
        </header>
        <Docs />
      </>
    );
  return <SignedIn path={path} user={user} setUser={setUser} signedOut={signedOut} />;
}

function SignedIn({ path, user, setUser, signedOut }: { path: string; user: User | null | undefined; setUser: (u: User | null) => void; signedOut: boolean }) {
  const [signOutError, setSignOutError] = useState("");
  useEffect(() => void currentUser().then(setUser), []);
  // Never pretends: a sign-out the server did not do says so, and the user stays signed in here.
  const leave = () => {
    setSignOutError("");
    signOut().catch((e) =>
      setSignOutError(`Sign-out failed: ${e instanceof ApiError && e.code === "NETWORK" ? "the server could not be reached" : e instanceof Error ? e.message : String(e)}. You are still signed in; try again.`),
    );
  };
  if (user === undefined)
    return (
      <>
        <SlowDown />
        <p class="muted center">Loading…</p>
      </>
    );
  // Signed out meanwhile (another tab, an expired session): sign in again, back to this page (an
  // unsent message waits in its composer).
  if (user === null || signedOut) return <SignIn expired={signedOut} />;
  const nav: [string, string][] = user.role === "admin" ? [...NAV, ["/operator", "Admin"]] : NAV;
  const active = (href: string) => (href === "/" ? path === "/" || path.startsWith("/sessions/") : path === href || path.startsWith(`${href}/`));
  return (
    <>
      <a class="skip" href="#main" onClick={skipToMain}>
        Skip to content
      </a>
      <header class="top">
        <Brand />
        <nav aria-label="Main">
          {nav.map(([href, label]) => (
            <a key={href} href={href} onClick={linkTo(href)} aria-current={active(href) ? "page" : undefined}>
              {label}
            </a>
          ))}
          <a href="/docs" target="_blank" rel="noopener">
            API docs
          </a>
        </nav>
        <span class="who">
          {user.email}
          {user.role === "admin" ? " (admin)" : ""}
        </span>
        <button type="button" onClick={leave}>
          Sign out
        </button>
      </header>
      {signOutError && (
        <div class="banner">
          <Alert text={signOutError} />
        </div>
      )}
      <SlowDown />
      {route(path, user)}
    </>
  );
}
