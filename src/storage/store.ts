/**
 * The pack store: where snapshot packs and manifests live. Implementations: the filesystem
 * (embedded default, `edge/deno/fs_store.ts`), R2 (`edge/cloudflare/r2_store.ts`).
 *
 * Keys are `/`-separated relative paths made of `[A-Za-z0-9._-]` segments.
 */
export interface StoredObject {
  /** The object's bytes (the requested range when one was given). */
  body: ReadableStream<Uint8Array>;
  /** Size of the whole object in bytes. */
  size: number;
}

/**
 * What a store says of one write of an object: changes whenever the object is rewritten, even to
 * the same size (filesystem: inode, change and modification times; R2: the etag, a digest of the
 * content). Not to be confused with the format version of a JSON document (`version: 1`).
 */
export type StoreVersion = string;

export interface ObjectInfo {
  key: string;
  size: number;
  /** When the object was written (ms since epoch). */
  modified: number;
  /** Its {@link StoreVersion}, where the store keeps one. */
  version?: StoreVersion;
}

export interface ByteRange {
  offset: number;
  /** Bytes to read from `offset`; to the end when absent. */
  length?: number;
}

export interface PackStore {
  /**
   * Streams `body` into `key`. The object becomes visible only once the whole body was written
   * (atomic publish); a failed or cancelled body leaves nothing behind under `key`.
   */
  put(key: string, body: ReadableStream<Uint8Array>): Promise<{ size: number }>;
  /**
   * Optional fast path for a body already in memory (same semantics as `put`). The bytes are not
   * kept after it resolves, so the caller may reuse the buffer.
   */
  putBuffer?(key: string, bytes: Uint8Array): Promise<{ size: number }>;
  /** Reads `key` (or a range of it); `null` when there is no such object. */
  get(key: string, range?: ByteRange): Promise<StoredObject | null>;
  head(key: string): Promise<ObjectInfo | null>;
  /** Removes `key`; removing a missing key is not an error. */
  delete(key: string): Promise<void>;
  /** Objects whose key starts with `prefix`. */
  list(prefix: string): Promise<ObjectInfo[]>;
  /**
   * Removes incomplete writes under `prefix` last touched before `olderThan` (ms since epoch):
   * what a process killed during a `put` leaves. Returns how many. Stores whose writes cannot
   * be left incomplete (R2 expires unfinished multipart uploads itself) do not have it.
   */
  sweepIncomplete?(prefix: string, olderThan: number): Promise<number>;
}

export class StoreError extends Error {
  override name = "StoreError";
}

const KEY_RE = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

/** Throws unless `key` is a safe relative key (no `..`, no absolute paths, no odd bytes). */
export function assertKey(key: string): void {
  if (!KEY_RE.test(key) || key.split("/").some((s) => s === "." || s === "..")) {
    throw new StoreError(`invalid store key: ${JSON.stringify(key)}`);
  }
}

export async function putBytes(store: PackStore, key: string, bytes: Uint8Array): Promise<void> {
  if (store.putBuffer) await store.putBuffer(key, bytes);
  else await store.put(key, new Blob([bytes as Uint8Array<ArrayBuffer>]).stream());
}

export async function getBytes(store: PackStore, key: string): Promise<Uint8Array | null> {
  const obj = await store.get(key);
  if (!obj) return null;
  return new Uint8Array(await new Response(obj.body).arrayBuffer());
}
