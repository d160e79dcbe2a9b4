/**
 * A WebSocket test client on the `ws` library (a real, independent client implementation):
 * records every frame, waits for frames or the close, and reports refused upgrades. Every frame
 * it receives is checked against the protocol's ServerFrame union (src/schema/stream.ts): a frame
 * the union does not describe fails the waiting test.
 */
import WebSocket from "ws";
import { ServerFrame } from "../../src/schema/stream.ts";
import { check } from "../../src/schema/validate.ts";

export interface Closed {
  code: number;
  reason: string;
}

export class WsClient {
  readonly frames: any[] = [];
  /** Frames that do not match the ServerFrame union, with why. */
  readonly invalid: { frame: unknown; error: string; field: unknown }[] = [];
  closed: Closed | null = null;
  private waiters: (() => void)[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data) => {
      const frame = JSON.parse(data.toString());
      try {
        check(ServerFrame, frame, "frame");
      } catch (e) {
        this.invalid.push({ frame, error: (e as Error).message, field: (e as { details?: { field?: unknown } }).details?.field });
      }
      this.frames.push(frame);
      this.notify();
    });
    ws.on("close", (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.notify();
    });
  }

  private notify() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Opens a socket; rejects with `{status}` when the upgrade is refused. */
  static connect(url: string, opts: { protocols?: string[]; headers?: Record<string, string> } = {}): Promise<WsClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, opts.protocols ?? [], { headers: opts.headers });
      const client = new WsClient(ws);
      ws.once("open", () => resolve(client));
      ws.once("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (c) => (body += c));
        res.on("end", () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode, body })));
      });
      ws.once("error", (e) => reject(e));
    });
  }

  send(msg: unknown) {
    this.ws.send(typeof msg === "string" ? msg : JSON.stringify(msg));
  }

  async waitFor(pred: (f: any) => boolean, timeoutMs = 15_000, from = 0): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.invalid.length) throw new Error(`a frame does not match the protocol: ${JSON.stringify(this.invalid[0])}`);
      const f = this.frames.slice(from).find(pred);
      if (f) return f;
      if (this.closed) throw new Error(`socket closed (${this.closed.code} ${this.closed.reason}) while waiting; frames: ${JSON.stringify(this.frames.slice(-5))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for a frame; last frames: ${JSON.stringify(this.frames.slice(-5))}`);
      await new Promise<void>((r) => {
        const timer = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          r();
        });
      });
    }
  }

  async waitClose(timeoutMs = 10_000): Promise<Closed> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error("socket did not close");
      await new Promise<void>((r) => {
        const timer = setTimeout(r, 50);
        this.waiters.push(() => {
          clearTimeout(timer);
          r();
        });
      });
    }
    return this.closed;
  }

  close() {
    this.ws.close();
  }
}
