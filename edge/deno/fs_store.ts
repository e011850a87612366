/**
 * Filesystem pack store: the embedded default of the Deno server. Objects are files under a root
 * directory; a put writes to a temporary file in the same directory and renames it into place, so an
 * object is visible only once complete.
 */
import {
  assertKey,
  type ByteRange,
  type ObjectInfo,
  type PackStore,
  StoreError,
} from "../../src/storage/store.ts";

export class FsPackStore implements PackStore {
  constructor(readonly root: string) {}

  #path(key: string): string {
    assertKey(key);
    return `${this.root}/${key}`;
  }

  /** The file that holds `key` (whole: tools like `git index-pack` may read it in place). */
  pathOf(key: string): string {
    return this.#path(key);
  }

  async put(key: string, body: ReadableStream<Uint8Array>): Promise<{ size: number }> {
    const path = this.#path(key);
    const dir = path.slice(0, path.lastIndexOf("/"));
    await Deno.mkdir(dir, { recursive: true });
    const tmp = `${path}.${crypto.randomUUID()}.tmp`;
    let size = 0;
    try {
      const file = await Deno.open(tmp, { write: true, createNew: true });
      try {
        size = await writeVerified(file, body, key);
      } finally {
        file.close();
      }
      await Deno.rename(tmp, path);
    } catch (err) {
      await body.cancel(err).catch(() => {});
      await Deno.remove(tmp).catch(() => {});
      throw err;
    }
    return { size };
  }

  async get(
    key: string,
    range?: ByteRange,
  ): Promise<{ body: ReadableStream<Uint8Array>; size: number } | null> {
    const path = this.#path(key);
    let file: Deno.FsFile;
    try {
      file = await Deno.open(path, { read: true });
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return null;
      throw err;
    }
    try {
      const { size } = await file.stat();
      if (!range) return { body: file.readable, size };
      if (range.offset < 0 || range.offset > size) {
        throw new StoreError(`range offset ${range.offset} outside ${key} (${size} bytes)`);
      }
      await file.seek(range.offset, Deno.SeekMode.Start);
      const length = Math.min(range.length ?? size - range.offset, size - range.offset);
      return { body: limitStream(file, length), size };
    } catch (err) {
      file.close();
      throw err;
    }
  }

  async head(key: string): Promise<ObjectInfo | null> {
    try {
      const st = await Deno.stat(this.#path(key));
      const version = `${st.ino ?? 0}-${st.ctime?.getTime() ?? 0}-${st.mtime?.getTime() ?? 0}`;
      return { key, size: st.size, modified: st.mtime?.getTime() ?? 0, version };
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return null;
      throw err;
    }
  }

  /** `head` for a `*.tmp` file (not a valid key: `assertKey` would refuse its name's dots). */
  async #statTemporary(key: string): Promise<ObjectInfo | null> {
    try {
      const st = await Deno.stat(`${this.root}/${key}`);
      return { key, size: st.size, modified: st.mtime?.getTime() ?? 0 };
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await Deno.remove(this.#path(key));
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  }

  /** Removes `*.tmp` files (puts cut short by a crash) under `prefix` older than `olderThan`. */
  async sweepIncomplete(prefix: string, olderThan: number): Promise<number> {
    let removed = 0;
    for (const info of await this.#walk(prefix, true)) {
      if (info.modified < olderThan) {
        await Deno.remove(`${this.root}/${info.key}`).catch(() => {});
        removed++;
      }
    }
    return removed;
  }

  list(prefix: string): Promise<ObjectInfo[]> {
    return this.#walk(prefix, false);
  }

  /** Complete objects (or, with `temporaries`, only `*.tmp` files) under `prefix`. */
  async #walk(prefix: string, temporaries: boolean): Promise<ObjectInfo[]> {
    const out: ObjectInfo[] = [];
    const slash = prefix.lastIndexOf("/");
    const dirKey = slash < 0 ? "" : prefix.slice(0, slash);
    const walk = async (rel: string): Promise<void> => {
      let entries: Deno.DirEntry[];
      try {
        entries = await Array.fromAsync(Deno.readDir(rel ? `${this.root}/${rel}` : this.root));
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) return;
        throw err;
      }
      for (const e of entries) {
        const key = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory) {
          if (prefix.startsWith(`${key}/`) || key.startsWith(prefix)) await walk(key);
        } else if (e.isFile && key.startsWith(prefix) && key.endsWith(".tmp") === temporaries) {
          const info = temporaries ? await this.#statTemporary(key) : await this.head(key);
          if (info) out.push(info);
        }
      }
    };
    await walk(dirKey);
    return out.sort((a, b) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  }
}

/** What {@link writeVerified} needs of a file (a `Deno.FsFile`; tests give faulty ones). */
export interface WritableFile {
  write(bytes: Uint8Array): Promise<number>;
  syncData(): Promise<void>;
  stat(): Promise<{ size: number }>;
}

/**
 * Writes every chunk of `body` to `file` with writes whose byte counts are checked, syncs it and
 * checks its size on disk: a stream piped into `file.writable` on a full disk can resolve with
 * fewer bytes written (seen with Deno 2.9.6 on a full tmpfs). Returns the bytes written; throws a
 * StoreError on a write that makes no progress or a file shorter than what was written.
 */
export async function writeVerified(
  file: WritableFile,
  body: ReadableStream<Uint8Array>,
  what: string,
): Promise<number> {
  let size = 0;
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let at = 0;
      while (at < value.byteLength) {
        const n = await file.write(value.subarray(at));
        if (!(n > 0)) throw new StoreError(`short write of ${what} at byte ${size + at}`);
        at += n;
      }
      size += value.byteLength;
    }
  } finally {
    reader.releaseLock();
  }
  // On disk before it is named: a crash after the rename must not leave a short object.
  await file.syncData();
  const onDisk = (await file.stat()).size;
  if (onDisk !== size) {
    throw new StoreError(`short write of ${what}: ${onDisk} of ${size} bytes on disk`);
  }
  return size;
}

/** Reads exactly `length` bytes from the file's current position, then closes it. */
function limitStream(file: Deno.FsFile, length: number): ReadableStream<Uint8Array> {
  let left = length;
  return new ReadableStream<Uint8Array>({
    type: "bytes",
    async pull(controller) {
      if (left <= 0) {
        file.close();
        controller.close();
        return;
      }
      const buf = new Uint8Array(Math.min(left, 64 * 1024));
      const n = await file.read(buf);
      if (n === null) {
        file.close();
        controller.error(new StoreError(`object ended ${left} bytes early`));
        return;
      }
      left -= n;
      controller.enqueue(buf.subarray(0, n));
    },
    cancel() {
      file.close();
    },
  });
}
