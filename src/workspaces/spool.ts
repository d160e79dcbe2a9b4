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

/** Files up to this size are held in memory; larger ones go to a file. */
export const IN_MEMORY_UP_TO = 1024 * 1024;
const READ_CHUNK = 256 * 1024;

export interface Detached {
  body: AsyncGenerator<Uint8Array>;
  /** Releases what holds the bytes (the file); idempotent, also done when `body` ends. */
  close(): Promise<void>;
}

/** Reads `source` (`size` bytes) to its end now and answers its bytes, no longer tied to the box. */
export async function detach(source: AsyncIterable<Uint8Array>, size: number, dir: string): Promise<Detached> {
  if (size <= IN_MEMORY_UP_TO) {
    const parts: Uint8Array[] = [];
    for await (const chunk of source) parts.push(chunk.slice());
    return { body: (async function* () { yield* parts; })(), close: async () => {} };
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, `download-${randomUUID()}`);
  const file = await open(path, "w+", 0o600);
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await file.close().catch(() => {});
  };
  try {
    await unlink(path);
    for await (const chunk of source) await file.write(chunk);
  } catch (e) {
    await close();
    throw e;
  }
  async function* read(): AsyncGenerator<Uint8Array> {
    try {
      for (let at = 0; ; ) {
        const buf = new Uint8Array(READ_CHUNK);
        const { bytesRead } = await file.read(buf, 0, READ_CHUNK, at);
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
