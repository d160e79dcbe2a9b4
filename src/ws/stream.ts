import type { Server, WebSocketHandler } from "bun";
import type { RequestContext } from "../http/context.ts";

/** The /v1/stream WebSocket server (implemented with the stream issue). */
export interface StreamServer {
  handlers: WebSocketHandler<unknown>;
  upgrade(req: Request, server: Server<unknown>, ctx: RequestContext): Promise<Response | undefined>;
  closeAll(code: number, reason: string): void;
}
