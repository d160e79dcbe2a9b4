/**
 * A WebSocket test client on the `ws` library (a real, independent client implementation):
 * records every frame, waits for frames or the close, and reports refused upgrades. Every frame
 * it receives is checked against the protocol's ServerFrame union (src/schema/stream.ts): a frame
 * the union does not describe fails the waiting test.
 */
import { connect as tcpConnect, type Socket as TcpSocket } from "node:net";
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
        res.on("end", () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode, body, headers: res.headers })));
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

/**
 * A raw client that stops reading: it completes the handshake over a plain TCP socket, sends
 * `session.resume` (one masked text frame), then pauses the socket, so the server's writes pile up
 * in its send buffer (what a stalled reader on a slow network looks like). Resume the socket to
 * read what the server sent before it gave up.
 */
export async function stalledReader(streamUrl: string, token: string, sessionId: string, after: number): Promise<TcpSocket> {
  const u = new URL(streamUrl);
  const sock = tcpConnect(Number(u.port), u.hostname);
  await new Promise<void>((r) => sock.once("connect", () => r()));
  const key = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64");
  sock.write(`GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  let handshake = "";
  await new Promise<void>((r) => {
    const onData = (d: Buffer) => {
      handshake += d.toString("latin1");
      if (handshake.includes("\r\n\r\n")) {
        sock.off("data", onData);
        r();
      }
    };
    sock.on("data", onData);
  });
  if (!handshake.startsWith("HTTP/1.1 101")) throw new Error(`upgrade refused: ${handshake.split("\r\n")[0]}`);
  const payload = Buffer.from(JSON.stringify({ type: "session.resume", session_id: sessionId, after }));
  if (payload.length > 0xffff) throw new Error("payload too large for this client");
  // FIN + text opcode, the mask bit, and the length: 7 bits, or 126 and 16 bits.
  const header = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length]) : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 255]);
  const mask = Buffer.from([1, 2, 3, 4]);
  sock.write(Buffer.concat([header, mask, Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!))]));
  await Bun.sleep(100);
  sock.pause();
  return sock;
}
