/**
 * Who is signed in (GET /api/auth/get-session, loaded once at start), signing out, and what the
 * browser keeps for the signed-in user: message drafts (sessionStorage `runcell.draft.*`) and the
 * last used profile (localStorage). Both belong to the account that wrote them: signing out here
 * forgets them, and a tab signed in as another account (after being signed out under the user: another
 * tab, an expired session) drops them before anything is shown — the same account finds its
 * unsent message again.
 */
import type { PublicUser } from "../../../src/schema/user.ts";
import { get, post } from "./api.ts";

export type User = PublicUser;

const DRAFT = "runcell.draft.";
/** sessionStorage: the user id whose drafts this tab holds. */
const OWNER = "runcell.owner";
/** localStorage: `<user id> <profile id>`, the profile a new session starts with by default. */
const LAST_PROFILE = "runcell.last_profile";
let me: string | null = null;

export async function currentUser(): Promise<User | null> {
  const s = await get<{ user: User } | null>("/api/auth/get-session").catch(() => null);
  const user = s?.user ?? null;
  if (user) {
    if (sessionStorage.getItem(OWNER) !== user.id) forget();
    sessionStorage.setItem(OWNER, user.id);
    me = user.id;
  }
  return user;
}

/** Drops the drafts and the last used profile. */
function forget() {
  for (const k of Object.keys(sessionStorage)) if (k.startsWith(DRAFT)) sessionStorage.removeItem(k);
  sessionStorage.removeItem(OWNER);
  localStorage.removeItem(LAST_PROFILE);
}

/** The signed-in user's last used profile ("" when none, or it was another account's). */
export function lastProfile(): string {
  const [user, profile] = (localStorage.getItem(LAST_PROFILE) ?? "").split(" ");
  return user === me && profile ? profile : "";
}
export function setLastProfile(profileId: string) {
  if (me) localStorage.setItem(LAST_PROFILE, `${me} ${profileId}`);
}

/**
 * Ends the login session, forgets the user's drafts and goes to the sign-in page. Throws (an
 * ApiError, NETWORK when the server cannot be reached) when the server did not sign out: the user
 * is still signed in and stays on the page.
 */
export async function signOut() {
  await post("/api/auth/sign-out");
  forget();
  location.assign("/");
}
