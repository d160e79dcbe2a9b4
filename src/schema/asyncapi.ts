/**
 * The /v1/stream protocol as an AsyncAPI 3 document, generated from the message schemas in
 * stream.ts (the same ones the server validates with and publishes through), so client authors
 * get the stream the way they get REST from /v1/openapi.json. It describes runcell's side: it
 * receives the client messages and sends the server frames.
 */
import type { TSchema } from "@sinclair/typebox";
import { documentNullAsAbsent } from "./common.ts";
import { CLIENT_MESSAGES, SERVER_FRAMES } from "./stream.ts";

/** AsyncAPI component keys allow [A-Za-z0-9._-]: `task:token` becomes `task_token`. */
const keyOf = (type: string) => type.replace(/[^A-Za-z0-9._-]/g, "_");

/** A TypeBox schema as plain JSON Schema (TypeBox's symbols dropped; null-as-absent fields documented as nullable). */
const json = (s: TSchema): Record<string, unknown> =>
  JSON.parse(JSON.stringify(s), (_key, value) => {
    if (value && typeof value === "object" && !Array.isArray(value)) documentNullAsAbsent(value);
    return value;
  });

const typeOf = (s: TSchema): string => (s as unknown as { properties: { type: { const: string } } }).properties.type.const;

export function asyncApiDocument(opts: { publicUrl: string; version: string }): Record<string, unknown> {
  const url = new URL(opts.publicUrl);
  const messages: Record<string, unknown> = {};
  const channelMessages: Record<string, unknown> = {};
  const refs = (schemas: readonly TSchema[]) =>
    schemas.map((s) => {
      const type = typeOf(s);
      const key = keyOf(type);
      messages[key] = {
        name: type,
        title: type,
        summary: (s as { description?: string }).description,
        contentType: "application/json",
        payload: json(s),
      };
      channelMessages[key] = { $ref: `#/components/messages/${key}` };
      return { $ref: `#/channels/stream/messages/${key}` };
    });
  const received = refs(Object.values(CLIENT_MESSAGES));
  const sent = refs(SERVER_FRAMES);

  return {
    asyncapi: "3.0.0",
    info: {
      title: "runcell stream",
      version: opts.version,
      description:
        "The WebSocket stream of agent execution at /v1/stream. Each frame is one JSON message with a `type`. Frames of a session carry `session_id` and a `seq` that is never given to two frames; frames of a task also carry `task_id`. A client message may carry `request_id`, echoed on the error frame it causes. Every client message counts against the caller's rate limit (an error frame RATE_LIMITED when exceeded). Close code 4001: authentication failed; 4029: the caller already holds the most sockets allowed (--max-sockets-per-caller, default 20); 1013: the reader fell too far behind (reconnect and session.resume; a reader that does not take its backlog within 5 s is dropped without the close frame); 1001: the server is shutting down; 1012: the user's role changed (reconnect and session.resume: the credential still holds); 1009: a message over 16 MiB (messages over 1 MiB up to that size are answered VALIDATION_FAILED and the socket stays open). This document describes the server: it receives the client messages and sends the server frames.",
    },
    defaultContentType: "application/json",
    servers: {
      runcell: {
        host: url.host,
        protocol: url.protocol === "https:" ? "wss" : "ws",
        description: "The runcell server; the stream is at /v1/stream",
        security: [
          { $ref: "#/components/securitySchemes/subprotocol" },
          { $ref: "#/components/securitySchemes/queryToken" },
          { $ref: "#/components/securitySchemes/bearer" },
          { $ref: "#/components/securitySchemes/cookie" },
        ],
      },
    },
    channels: {
      stream: {
        address: "/v1/stream",
        title: "Agent execution stream",
        messages: channelMessages,
        bindings: {
          ws: {
            method: "GET",
            query: { type: "object", properties: { token: { type: "string", description: "An API token, for clients (browsers) that cannot set a subprotocol" } } },
            bindingVersion: "0.1.0",
          },
        },
      },
    },
    operations: {
      receiveClientMessages: {
        action: "receive",
        channel: { $ref: "#/channels/stream" },
        title: "Client messages",
        summary: "What a client may send: submit and cancel tasks, answer questions, start, resume and continue sessions.",
        messages: received,
      },
      sendServerFrames: {
        action: "send",
        channel: { $ref: "#/channels/stream" },
        title: "Server frames",
        summary: "What the server sends: session and task frames (stored in the transcript with their seq), replay markers and error frames.",
        messages: sent,
      },
    },
    components: {
      messages,
      securitySchemes: {
        subprotocol: { type: "httpApiKey", in: "header", name: "Sec-WebSocket-Protocol", description: "The subprotocol `Bearer.<API token>`" },
        queryToken: { type: "httpApiKey", in: "query", name: "token", description: "`?token=<API token>`" },
        bearer: { type: "http", scheme: "bearer", description: "`Authorization: Bearer <API token>` (clients that can set headers)" },
        cookie: { type: "httpApiKey", in: "cookie", name: "runcell.session_token", description: "The dashboard's session cookie (same-origin upgrades only)" },
      },
    },
  };
}
