/**
 * Read-only access to a whole file's bytes without copying where the runtime allows it: Bun maps
 * the file (Bun.mmap, private mapping, so pages load lazily and are shared with the page cache);
 * Deno and Node read it into one buffer.
 * @module
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";

interface BunMmap {
  mmap(path: string, options?: { shared?: boolean }): Uint8Array;
}

function bunMmap(): BunMmap["mmap"] | undefined {
  const bun = (globalThis as { Bun?: Partial<BunMmap> }).Bun;
  return typeof bun?.mmap === "function" ? bun.mmap.bind(bun) : undefined;
}

// Reads go in pieces: a single read(2) returns at most ~2 GiB on Linux.
const READ_CHUNK = 1 << 30;

/**
 * The bytes of the file at `path`. Treat the result as read-only. Under Bun it stays valid while
 * referenced; the file must not be truncated meanwhile (deleting it is fine on Linux).
 */
export function mapFile(path: string): Uint8Array {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const mmap = bunMmap();
    // Bun.mmap rejects empty files (EINVAL); an empty file has no bytes to map anyway.
    if (mmap && size > 0) return mmap(path, { shared: false });
    // A plain Uint8Array rather than readFileSync's Buffer, whose size limit is lower.
    const out = new Uint8Array(size);
    for (let done = 0; done < size;) {
      const n = readSync(fd, out, done, Math.min(READ_CHUNK, size - done), done);
      if (n === 0) throw new Error(`${path}: file shrank while reading (${done} of ${size} bytes)`);
      done += n;
    }
    return out;
  } finally {
    closeSync(fd);
  }
}
