/** Who is signed in (GET /api/auth/get-session), loaded once at start. */
import type { PublicUser } from "../../../src/schema/user.ts";
import { get, post } from "./api.ts";

export type User = PublicUser;

export async function currentUser(): Promise<User | null> {
  const s = await get<{ user: User } | null>("/api/auth/get-session").catch(() => null);
  return s?.user ?? null;
}

export async function signOut() {
  await post("/api/auth/sign-out").catch(() => {});
  location.assign("/");
}
