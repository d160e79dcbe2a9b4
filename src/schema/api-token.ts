/** API tokens (`rc_…`) as the API shows them: the plaintext only in the creation answer. */
import { apiTokens } from "../db/schema.ts";
import { Body, Label, NullableTimestamp, recordColumns, type Static, T, Timestamp } from "./common.ts";

const columns = recordColumns(apiTokens, ["id", "name"]);

export const TokenRecord = T.Object({ ...columns, created_at: Timestamp, last_used_at: NullableTimestamp }, { title: "ApiToken" });
export type TokenRecord = Static<typeof TokenRecord>;

export const CreatedToken = T.Object(
  { ...columns, token: T.String({ description: "rc_<64 hex>: shown this once, never again" }), created_at: Timestamp },
  { title: "CreatedApiToken" },
);
export type CreatedToken = Static<typeof CreatedToken>;

export const TokenCreateBody = Body({ name: Label });
