/**
 * Revoked credentials, across replicas. A token deleted, a sign-in session ended, a user signed
 * out everywhere or disabled on one replica must stop working on every replica at once — not when
 * another replica's token cache entry runs out (60 s), and not only for sockets that replica
 * holds. The replica where it happens announces it on the bus; the others drop their cached
 * verifications and close the sockets the credential opened (4001), as the first one did.
 *
 * REST stays safe without the message: cookie sessions and users are read from the database on
 * every request on PostgreSQL. The message is what closes other replicas' sockets and their token
 * caches; one lost (the LISTEN connection down at that moment) leaves a deleted token usable on
 * another replica for at most the cache's 60 s.
 */
import type { Logger } from "../log.ts";
import { type Bus, CHANNELS } from "./bus.ts";

export type Revocation = { token: string } | { login: string; expired?: true } | { user: string } | { disabled: string } | { role: string };

export interface RevocationTargets {
  /** A token deleted: its cached verifications and the sockets it opened. */
  token(tokenId: string): void;
  /** A sign-in session ended (signed out, or `expired`): its sockets. */
  login(loginSessionId: string, expired: boolean): void;
  /** Every sign-in session of a user ended: the user's sockets. */
  user(userId: string): void;
  /** A user disabled: their cached token verifications and their sockets. */
  disabled(userId: string): void;
  /** A user's role changed: their sockets reconnect under the new role. */
  role(userId: string): void;
}

export class Revocations {
  constructor(
    private bus: Bus,
    private log: Logger,
  ) {}

  /** Tells the other replicas (nothing to tell on SQLite: one server). */
  announce(r: Revocation): void {
    if (!this.bus.shared) return;
    this.bus.notify(CHANNELS.auth, r).catch((err) => this.log.error("revocation not announced to the other replicas", { err, kind: Object.keys(r)[0] }));
  }

  /** Applies the other replicas' revocations here. */
  async listen(targets: RevocationTargets): Promise<void> {
    await this.bus.listen(CHANNELS.auth, (m) => {
      if (typeof m.token === "string") targets.token(m.token);
      else if (typeof m.login === "string") targets.login(m.login, m.expired === true);
      else if (typeof m.user === "string") targets.user(m.user);
      else if (typeof m.disabled === "string") targets.disabled(m.disabled);
      else if (typeof m.role === "string") targets.role(m.role);
    });
  }
}
