/**
 * An MCP transport over a process in the workspace (stdio servers): newline-delimited JSON-RPC on
 * the stdin/stdout of a Docker exec, framed with the SDK's own ReadBuffer and serializeMessage so
 * the wire is exactly the SDK's StdioClientTransport's. stderr is kept (its tail only) for error
 * messages.
 */
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { AttachedProcess } from "../workspaces/process.ts";

const STDERR_TAIL = 2048;

export class ExecStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private proc: AttachedProcess | null = null;
  private buffer = new ReadBuffer();
  private stderr = "";
  private closed = false;
  /** Why this transport stopped the server itself, if it did. */
  stoppedBecause: string | null = null;

  constructor(private open: () => Promise<AttachedProcess>) {}

  async start(): Promise<void> {
    const proc = await this.open();
    this.proc = proc;
    proc.onStdout = (chunk) => {
      if (this.closed) return;
      try {
        this.buffer.append(Buffer.from(chunk));
      } catch (e) {
        // The SDK's buffer refuses a line over 10 MiB (it throws from here, the Docker stream's
        // data callback, where nothing would catch it): the server is misbehaving, so it is
        // stopped and its calls fail, as for a server that died.
        this.stoppedBecause = "it wrote more than 10 MiB without a line break, and was stopped";
        this.onerror?.(new Error(`the server ${this.stoppedBecause} (${(e as Error).message})`));
        void this.close();
        return;
      }
      for (;;) {
        let msg: JSONRPCMessage | null;
        try {
          msg = this.buffer.readMessage();
        } catch (e) {
          this.onerror?.(e as Error);
          continue;
        }
        if (!msg) break;
        this.onmessage?.(msg);
      }
    };
    proc.onStderr = (chunk) => {
      this.stderr = (this.stderr + new TextDecoder().decode(chunk)).slice(-STDERR_TAIL);
    };
    void proc.exited.then(() => this.finish());
  }

  /** The last lines the server wrote to stderr (for error messages). */
  stderrTail(): string {
    return this.stderr.trim();
  }

  get alive(): boolean {
    return !!this.proc?.alive;
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!this.proc?.alive) throw new Error("the server process has exited");
    this.proc.write(serializeMessage(message));
  }

  /** Kills the server's process tree. */
  async close(): Promise<void> {
    await this.proc?.kill();
    this.finish();
  }

  private finish() {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    this.onclose?.();
  }
}
