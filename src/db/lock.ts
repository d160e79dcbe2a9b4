/**
 * One owner per data dir: `serve`, `migrate` and `restore` hold an exclusive `flock(2)` on
 * `<data dir>/runcell.lock` for as long as they run, and write their pid into it. The kernel drops
 * the lock when the process ends, however it ends (also `kill -9`), so there is never a stale lock
 * to clean up; the file itself stays (deleting a lock file races with the next opener).
 *
 * `flock` is called through `bun:ffi` on the C library (glibc or musl on Linux, libSystem on
 * macOS); it works the same in the compiled binary. Where no C library can be loaded, a pid file
 * checked with `kill(pid, 0)` stands in (weaker: a recycled pid looks alive).
 */
import { closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readFileSync, readSync, writeSync } from "node:fs";
import { join } from "node:path";
import { dlopen, FFIType, type Pointer, read } from "bun:ffi";
import { ownLikeDataDir } from "./data-dir.ts";

export const LOCK_FILE = "runcell.lock";

/** The data dir is locked by another process; `pid` is the holder (null when it could not be read). */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number | null,
  ) {
    super(
      `the data dir ${dataDir} is in use by another runcell process (pid ${pid ?? "unknown"}, see ${join(dataDir, LOCK_FILE)}). ` +
        `Nothing was changed. Stop that process first (e.g. systemctl stop runcell), or use another --data-dir.`,
    );
    this.name = "DataDirLockedError";
  }
}

export interface DataDirLock {
  readonly path: string;
  /** Unlocks and closes the file (idempotent). Exiting the process does the same. */
  release(): void;
}

const LOCK_SH = 1;
const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;
const EWOULDBLOCK = new Set([11, 35]); // Linux EAGAIN, macOS EWOULDBLOCK

interface Libc {
  flock(fd: number, op: number): number;
  errno(): number;
}

let libc: Libc | null | undefined;

function loadLibc(): Libc | null {
  if (libc !== undefined) return libc;
  libc = null;
  const candidates =
    process.platform === "darwin"
      ? [["libSystem.B.dylib", "__error"]]
      : [["libc.so.6", "__errno_location"], [`libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`, "__errno_location"], ["libc.so", "__errno_location"]];
  for (const [name, errnoFn] of candidates as [string, string][]) {
    try {
      const lib = dlopen(name, {
        flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
        [errnoFn]: { args: [], returns: FFIType.ptr },
      });
      const symbols = lib.symbols as unknown as Record<string, (...a: number[]) => unknown>;
      libc = {
        flock: (fd, op) => symbols.flock!(fd, op) as number,
        errno: () => {
          const p = symbols[errnoFn]!() as Pointer | null;
          return p ? read.i32(p, 0) : 0;
        },
      };
      break;
    } catch {
      // not this C library; try the next
    }
  }
  return libc;
}

function parsePid(text: string): number | null {
  const n = Number.parseInt(text.trim(), 10);
  return Number.isInteger(n) && n > 0 ? n : null;
}

function readPid(path: string): number | null {
  try {
    return parsePid(readFileSync(path, "utf8"));
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

const sleepSync = (ms: number) => Bun.sleepSync(ms);

/**
 * Takes the data dir's lock (creating the data dir 0700 and the lock file 0600 when missing) and
 * writes this process's pid into it. Throws DataDirLockedError, with the holder's pid, when another
 * process holds it; any other failure (no locking on this filesystem…) throws a plain Error.
 */
export function acquireDataDirLock(dataDir: string): DataDirLock {
  if (!existsSync(dataDir)) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const path = join(dataDir, LOCK_FILE);
  const c = loadLibc();
  if (!c) return acquirePidFile(dataDir, path);

  // A holder may be in the short window between its flock and writing its pid, or lockHolder may
  // be probing with a shared lock: retry briefly before calling the data dir taken.
  const deadline = Date.now() + 300;
  for (;;) {
    let fd: number;
    try {
      fd = openSync(path, "a+", 0o600);
    } catch (e) {
      throw new Error(`cannot open the lock file ${path}: ${(e as Error).message} (run runcell as the data dir's owner)`);
    }
    if (c.flock(fd, LOCK_EX | LOCK_NB) === 0) {
      // Made by `sudo runcell …`, the lock file would shut the service user out of its own data dir.
      ownLikeDataDir(path, dataDir);
      ftruncateSync(fd, 0);
      writeSync(fd, `${process.pid}\n`);
      let held = true;
      return {
        path,
        release() {
          if (!held) return;
          held = false;
          try {
            ftruncateSync(fd, 0);
          } catch {
            // best effort: the content only names the holder while the lock is held
          }
          c.flock(fd, LOCK_UN);
          closeSync(fd);
        },
      };
    }
    const errno = c.errno();
    closeSync(fd);
    if (errno !== 0 && !EWOULDBLOCK.has(errno)) throw new Error(`cannot lock ${path}: flock failed (errno ${errno}); is the data dir on a filesystem without locks?`);
    const pid = readPid(path);
    if (Date.now() >= deadline) throw new DataDirLockedError(dataDir, pid);
    sleepSync(pid ? 50 : 10);
  }
}

/**
 * The pid of the process holding the data dir's lock, or null when no process holds it (no lock
 * file, or nobody has it locked); -1 when it is held but the holder's pid cannot be read. Never takes the lock itself: it probes with a shared,
 * non-blocking flock that it drops at once.
 */
export function lockHolder(dataDir: string): number | null {
  const path = join(dataDir, LOCK_FILE);
  if (!existsSync(path)) return null;
  const c = loadLibc();
  if (!c) {
    const pid = readPid(path);
    return pid && alive(pid) ? pid : null;
  }
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw e;
  }
  try {
    if (c.flock(fd, LOCK_SH | LOCK_NB) === 0) {
      c.flock(fd, LOCK_UN);
      return null;
    }
    const errno = c.errno();
    if (errno !== 0 && !EWOULDBLOCK.has(errno)) throw new Error(`cannot probe ${path}: flock failed (errno ${errno})`);
    // Held: the holder writes its pid right after locking; give it a moment if it is not there yet.
    for (let i = 0; i < 20; i++) {
      const buf = Buffer.alloc(32);
      const n = readSync(fd, buf, 0, 32, 0);
      const pid = parsePid(buf.subarray(0, n).toString("utf8"));
      if (pid) return pid;
      sleepSync(5);
    }
    return -1;
  } finally {
    closeSync(fd);
  }
}

/** Fallback without flock: the lock file holds a live pid. */
function acquirePidFile(dataDir: string, path: string): DataDirLock {
  const pid = readPid(path);
  if (pid && pid !== process.pid && alive(pid)) throw new DataDirLockedError(dataDir, pid);
  const fd = openSync(path, "w", 0o600);
  writeSync(fd, `${process.pid}\n`);
  closeSync(fd);
  ownLikeDataDir(path, dataDir);
  let held = true;
  return {
    path,
    release() {
      if (!held) return;
      held = false;
      if (readPid(path) === process.pid) {
        const f = openSync(path, "w", 0o600);
        closeSync(f);
      }
    },
  };
}
