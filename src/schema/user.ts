/** Accounts and cookie sessions as the API shows them (/api/auth/*, /admin/users). */
import { loginSessions, ROLES, users } from "../db/schema.ts";
import { Body, OneOf, recordColumns, type Static, T, Timestamp } from "./common.ts";
import { PolicyOverridePatch, PolicyPatch } from "./policy.ts";

export const Role = OneOf(ROLES);

const account = recordColumns(users, ["id", "email", "name", "role"]);

/** The user record of /api/auth/* (better-auth's `user`). */
export const PublicUser = T.Object({ ...account, created_at: Timestamp }, { title: "User" });
export type PublicUser = Static<typeof PublicUser>;

/** The record /admin/users returns. */
export const AdminUser = T.Object(
  {
    ...account,
    ...recordColumns(users, ["disabled", "email_verified"]),
    policy: T.Union([PolicyPatch, T.Null()], { description: "The operator's overrides of the policy for this user (null: the server's settings apply)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: "AdminUser" },
);
export type AdminUser = Static<typeof AdminUser>;

/** A cookie session (better-auth's `session`). */
export const LoginSessionRecord = T.Object({ ...recordColumns(loginSessions, ["id", "user_id"]), expires_at: Timestamp, created_at: Timestamp }, { title: "LoginSession" });
export type LoginSessionRecord = Static<typeof LoginSessionRecord>;

export const SignedIn = T.Object({ token: T.String({ description: "The session token (also set as the cookie)" }), user: PublicUser });

// better-auth's client sends fields of its own (callbackURL, image…): these bodies let them pass.
// Open: better-auth's client sends fields of its own (callbackURL…); said so explicitly, so the
// router never closes them and the API document shows them open.
export const SignUpBody = T.Object({ name: T.Optional(T.String()), email: T.String(), password: T.String(), rememberMe: T.Optional(T.Boolean()) }, { additionalProperties: true });
export const SignInBody = T.Object({ email: T.String(), password: T.String(), rememberMe: T.Optional(T.Boolean()) }, { additionalProperties: true });

export const SetupBody = Body({
  token: T.String({ minLength: 1, maxLength: 200, description: "The part after # of the setup link" }),
  email: T.String({ maxLength: 254 }),
  password: T.String({ description: "8 to 256 characters" }),
  name: T.Optional(T.String({ maxLength: 200 })),
});

export const AdminUserCreateBody = Body({
  email: T.String({ maxLength: 254 }),
  password: T.String({ description: "8 to 256 characters" }),
  name: T.Optional(T.String({ maxLength: 200 })),
  role: T.Optional(Role),
});

export const AdminUserPatchBody = Body({
  role: T.Optional(Role),
  disabled: T.Optional(T.Boolean()),
  policy: T.Optional(T.Union([PolicyOverridePatch, T.Null()], { description: "Overrides merged into the user's: a field set to null goes back to the server's setting; null clears them all" })),
});
