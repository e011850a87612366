/**
 * `PackStore` over an R2 bucket binding.
 *
 * R2 only accepts a `ReadableStream` body whose length is known up front (a request/response body
 * with Content-Length, or a `FixedLengthStream`), and a snapshot pack's length is not known until
 * it has been produced. So `put` re-chunks the body into fixed-size parts: a body that fits in one
 * part is sent as a single `put` of that part's bytes; anything longer becomes a multipart upload
 * streamed part by part. Memory stays bounded by one part either way, and both paths publish
 * atomically: R2 makes an object visible only when its `put` or `complete` succeeds.
 */
import {
  assertKey,
  type ByteRange,
  type ObjectInfo,
  type PackStore,
  type StoredObject,
  StoreError,
} from "../../src/storage/store.ts";
import { DEFAULT_R2_PART_MIB } from "../../src/proxy/settings/table.ts";
import { firstPart, type Part, type PartBufferHolder } from "../../src/storage/fixed_parts.ts";
import type {
  R2Bucket,
  R2MultipartUpload,
  R2Object,
  R2Range,
  R2UploadedPart,
} from "./worker_types.ts";

/** R2's smallest allowed multipart part (every part except the last). */
export const R2_MIN_PART_BYTES = 5 * 1024 * 1024;

/** Default part size: the settings table's `R2_PART_MIB` default. */
export const DEFAULT_PART_BYTES = DEFAULT_R2_PART_MIB * 1024 * 1024;

export interface R2PackStoreOptions {
  /**
   * Bytes per multipart part, and the largest body sent as a single `put`. At least
   * `R2_MIN_PART_BYTES`. Defaults to `DEFAULT_PART_BYTES`.
   */
  partBytes?: number;
  /** Objects per `list` page requested from R2 (1 to 1000; R2's default when absent). */
  listPageSize?: number;
}

/**
 * One part buffer a finished `put` left, for the next one in this isolate to fill: a build stores
 * its segments and packs one after the other, and each would otherwise allocate one part (and
 * leave it to the collector, which lets many pile up before it frees them). One per isolate, so
 * its cost is one part whatever the number of stores (Durable Objects) in it.
 */
let spare: Uint8Array | undefined;

/** The spare buffer when it fits parts of `size` bytes (it is then no longer spare). */
function takeSpare(size: number): Uint8Array | undefined {
  const taken = spare;
  spare = undefined;
  return taken && taken.byteLength >= size ? taken : undefined;
}

/** A `PackStore` backed by an R2 bucket binding. */
export class R2PackStore implements PackStore {
  readonly #bucket: R2Bucket;
  readonly #partBytes: number;
  readonly #listPageSize: number | undefined;

  constructor(bucket: R2Bucket, options: R2PackStoreOptions = {}) {
    const partBytes = options.partBytes ?? DEFAULT_PART_BYTES;
    if (!Number.isInteger(partBytes) || partBytes < R2_MIN_PART_BYTES) {
      throw new StoreError(
        `R2 part size must be an integer of at least ${R2_MIN_PART_BYTES} bytes, got ${partBytes}`,
      );
    }
    const pageSize = options.listPageSize;
    if (
      pageSize !== undefined && (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000)
    ) {
      throw new StoreError(`R2 list page size must be an integer from 1 to 1000, got ${pageSize}`);
    }
    this.#bucket = bucket;
    this.#partBytes = partBytes;
    this.#listPageSize = pageSize;
  }

  /** Streams `body` into `key`: one `put` when it fits in a part, multipart otherwise. */
  async put(key: string, body: ReadableStream<Uint8Array>): Promise<{ size: number }> {
    assertKey(key);
    // Every part is filled into one buffer (each is sent before the next is read), the spare one
    // when there is one; it becomes the spare again once the put has succeeded.
    const reuse: PartBufferHolder = { buffer: takeSpare(this.#partBytes) };
    let parts: Awaited<ReturnType<typeof firstPart>>;
    try {
      parts = await firstPart(body, this.#partBytes, reuse);
    } catch (error) {
      throw storeError(`reading the body for ${key}`, error);
    }
    const { first, rest } = parts;
    let size: number;
    if (first.last) {
      const written = await r2Call(`putting ${key}`, () => this.#bucket.put(key, first.bytes));
      if (written === null) throw new StoreError(`R2 refused to write ${key}`);
      size = written.size;
    } else {
      size = (await this.#putMultipart(key, first, rest)).size;
    }
    spare = reuse.buffer;
    return { size };
  }

  /** Writes bytes already in memory: one `put` when they fit in a part, multipart otherwise. */
  async putBuffer(key: string, bytes: Uint8Array): Promise<{ size: number }> {
    assertKey(key);
    if (bytes.byteLength > this.#partBytes) {
      return await this.put(key, new Blob([bytes as Uint8Array<ArrayBuffer>]).stream());
    }
    const written = await r2Call(`putting ${key}`, () => this.#bucket.put(key, bytes));
    if (written === null) throw new StoreError(`R2 refused to write ${key}`);
    return { size: written.size };
  }

  async #putMultipart(
    key: string,
    first: Part,
    rest: AsyncGenerator<Part, void, undefined>,
  ): Promise<{ size: number }> {
    let upload: R2MultipartUpload;
    try {
      upload = await this.#bucket.createMultipartUpload(key);
    } catch (error) {
      await rest.return(undefined);
      throw storeError(`starting a multipart upload of ${key}`, error);
    }
    try {
      const uploaded: R2UploadedPart[] = [await upload.uploadPart(1, first.bytes)];
      for await (const part of rest) {
        uploaded.push(await upload.uploadPart(uploaded.length + 1, part.bytes));
      }
      const object = await upload.complete(uploaded);
      return { size: object.size };
    } catch (error) {
      // Release the source (a no-op if it already failed) and drop the parts uploaded so far.
      const cleanup = await Promise.allSettled([rest.return(undefined), upload.abort()]);
      const cleanupErrors = cleanup.flatMap((r) => r.status === "rejected" ? [r.reason] : []);
      const cause = cleanupErrors.length === 0
        ? error
        : new AggregateError([error, ...cleanupErrors], "upload and cleanup both failed");
      throw storeError(`multipart upload of ${key}`, cause);
    }
  }

  /** Reads `key`, or `range` of it; `size` is always the whole object's size. */
  async get(key: string, range?: ByteRange): Promise<StoredObject | null> {
    assertKey(key);
    const r2Range = range === undefined ? undefined : toR2Range(key, range);
    const object = await r2Call(
      `reading ${key}`,
      () => this.#bucket.get(key, r2Range ? { range: r2Range } : undefined),
    );
    if (object === null) return null;
    return { body: object.body, size: object.size };
  }

  async head(key: string): Promise<ObjectInfo | null> {
    assertKey(key);
    const object = await r2Call(`inspecting ${key}`, () => this.#bucket.head(key));
    return object === null ? null : toInfo(object);
  }

  async delete(key: string): Promise<void> {
    assertKey(key);
    await r2Call(`deleting ${key}`, () => this.#bucket.delete(key));
  }

  /** Every object under `prefix`, following R2's list cursor across pages. */
  async list(prefix: string): Promise<ObjectInfo[]> {
    const found: ObjectInfo[] = [];
    let cursor: string | undefined;
    do {
      const page = await r2Call(
        `listing ${prefix}`,
        () => this.#bucket.list({ prefix, cursor, limit: this.#listPageSize }),
      );
      for (const object of page.objects) found.push(toInfo(object));
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor !== undefined);
    return found;
  }
}

function toInfo(object: R2Object): ObjectInfo {
  return {
    key: object.key,
    size: object.size,
    modified: object.uploaded.getTime(),
    version: object.etag,
  };
}

function toR2Range(key: string, range: ByteRange): R2Range {
  const { offset, length } = range;
  if (!Number.isInteger(offset) || offset < 0) {
    throw new StoreError(`invalid range offset ${offset} for ${key}`);
  }
  if (length === undefined) return { offset };
  if (!Number.isInteger(length) || length < 0) {
    throw new StoreError(`invalid range length ${length} for ${key}`);
  }
  return { offset, length };
}

function storeError(action: string, cause: unknown): StoreError {
  if (cause instanceof StoreError) return cause;
  const detail = cause instanceof Error ? cause.message : String(cause);
  return new StoreError(`R2 store: ${action} failed: ${detail}`, { cause });
}

/** Runs one R2 binding call, turning its failures into `StoreError`s that name the action. */
async function r2Call<T>(action: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw storeError(action, error);
  }
}
