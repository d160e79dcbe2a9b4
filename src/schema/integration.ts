/** The webhook integration (one per user): the secret goes in and never comes out (`has_secret`). */
import { INTEGRATION_TYPES, integrations } from "../db/schema.ts";
import { Body, OneOf, recordColumns, type Static, T, Timestamp } from "./common.ts";

export const SECRET_MAX = 512;

export const IntegrationRecord = T.Object(
  {
    ...recordColumns(integrations, ["id"]),
    type: OneOf(INTEGRATION_TYPES),
    config: T.Object({
      url: T.String(),
      has_secret: T.Boolean({ description: "Whether deliveries are signed; the secret itself is never returned" }),
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: "Integration" },
);
export type IntegrationRecord = Static<typeof IntegrationRecord>;

export const IntegrationBody = Body({
  type: OneOf(INTEGRATION_TYPES, { description: "The only integration type: an outbound webhook" }),
  config: T.Object({
    url: T.String({ maxLength: 2048, description: "http(s) URL that receives the POSTs; must resolve to public addresses" }),
    secret: T.Optional(T.String({ maxLength: SECRET_MAX, description: "HMAC key for X-Service-Signature; write-only" })),
  }),
});
export type IntegrationBody = Static<typeof IntegrationBody>;
