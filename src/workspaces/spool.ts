/**
 * A file read out of a box, detached from the box before anyone consumes it. On Docker, reading a
 * container's archive holds that container's lock until the archive's stream ends: a client that
 * reads a download slowly (or stalls on purpose, holding a signed URL that needs no credential)
 * would pace that stream, and every other call on the container — a tool's exec, an inspect, its
 * removal — would wait behind it. So the stream is read to its end as fast as the engine sends it:
 * into memory up to IN_MEMORY_UP_TO, else into an anonymous file in `dir` (unlinked as soon as it is
 * open: a crash leaves nothing behind), and the client is served from there.
 */
import { randomUUID } from "node:crypto";
import { mkdir, open, unlink } from "node:fs/promises";
import { join } from "node:path";
import { Errors } from "../lib/errors.ts";

/** Files up to this size are held in memory; larger ones go to a file. */
export const IN_MEMORY_UP_TO = 1024 * 1024;
const READ_CHUNK = 256 * 1024;
/** The default of SpoolBudget: spooled bytes held at once, across all downloads under way. */
export const MAX_SPOOLED_BYTES = 1024 * 1024 * 1024;
/** Seconds a download refused for want of room is told to wait (Retry-After). */
const RETRY_AFTER_S = 5;

/**
 * The disk the spool may take at once: every spooled download holds its file's size until its
 * client has it (or goes), so many slow clients of large files — a signed URL needs no credential —
 * cannot fill the data dir's disk. A download past it is refused with 429 RATE_LIMITED and a
 * Retry-After, before anything is copied.
 */
export class SpoolBudget {
  private used = 0;
  constructor(readonly limit = MAX_SPOOLED_BYTES) {}

  /** Takes `bytes`, or answers false when they do not fit. */
  take(bytes: number): boolean {
    if (this.used + bytes > this.limit) return false;
    this.used += bytes;
    return true;
  }

  give(bytes: number): void {
    this.used = Math.max(0, this.used - bytes);
  }

  get inUse(): number {
    return this.used;
  }
}

export interface Detached {
  body: AsyncGenerator<Uint8Array>;
  /** Releases what holds the bytes (the file); idempotent, also done when `body` ends. */
  close(): Promise<void>;
}

/**
 * Reads `source` (`size` bytes) to its end now and answers its bytes, no longer tied to the box.
 * A file spooled to disk holds its size of `budget` until closed; none left: RATE_LIMITED, and
 * `source` is left unread (the caller closes it).
 */
export async function detach(source: AsyncIterable<Uint8Array>, size: number, dir: string, budget: SpoolBudget): Promise<Detached> {
  if (size <= IN_MEMORY_UP_TO) {
    const parts: Uint8Array[] = [];
    for await (const chunk of source) parts.push(chunk.slice());
    return { body: (async function* () { yield* parts; })(), close: async () => {} };
  }
  if (!budget.take(size)) {
    throw Errors.rateLimited(RETRY_AFTER_S, "Too many large workspace files are being downloaded from this server right now; try again in a few seconds");
  }
  let closed = false;
  let file: Awaited<ReturnType<typeof open>> | null = null;
  const close = async () => {
    if (closed) return;
    closed = true;
    budget.give(size);
    await file?.close().catch(() => {});
  };
  const path = join(dir, `download-${randomUUID()}`);
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    file = await open(path, "w+", 0o600);
    await unlink(path);
    for await (const chunk of source) await file.write(chunk);
  } catch (e) {
    await close();
    throw e;
  }
  const spooled = file;
  async function* read(): AsyncGenerator<Uint8Array> {
    try {
      for (let at = 0; ; ) {
        const buf = new Uint8Array(READ_CHUNK);
        const { bytesRead } = await spooled.read(buf, 0, READ_CHUNK, at);
        if (bytesRead === 0) return;
        at += bytesRead;
        yield buf.subarray(0, bytesRead);
      }
    } finally {
      await close();
    }
  }
  return { body: read(), close };
}
