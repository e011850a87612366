/**
 * `PackStore` over an S3-compatible bucket (AWS S3, R2's S3 API, MinIO, Ceph RGW), selected by
 * `--store s3://bucket/prefix`. Built on the AWS SDK's S3 client (`@aws-sdk/client-s3`): its
 * SigV4 signing, credential chain (the standard `AWS_*` environment, `~/.aws/config` and
 * `~/.aws/credentials`, profiles, instance and container roles), endpoint and region resolution
 * (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, `AWS_REGION`) and its standard retry strategy
 * (exponential backoff with jitter on 5xx, throttling and connection errors; `AWS_MAX_ATTEMPTS`).
 * Credentials never pass through this module, so nothing here can log them.
 *
 * Writes publish atomically: a body that fits in one part is one `PutObject`; a longer one is a
 * multipart upload streamed part by part (`fixedSizeParts`: one part in memory), which becomes
 * visible only at `CompleteMultipartUpload` and is aborted when anything fails. Every part goes
 * with its `Content-MD5` (the store refuses a part damaged on the way), and the ETag the store
 * answers is checked against it. A whole-object read is checked against the object's ETag where
 * the ETag is its MD5 (a single-part upload without KMS); a ranged read is streamed as it comes.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { md5 } from "@noble/hashes/legacy.js";
import {
  assertKey,
  type ByteRange,
  type ObjectInfo,
  type PackStore,
  type StoredObject,
  StoreError,
} from "../../src/storage/store.ts";
import { firstPart, type Part } from "../../src/storage/fixed_parts.ts";

/** S3's smallest multipart part (every part except the last). */
export const S3_MIN_PART_BYTES = 5 * 1024 * 1024;
/** Default part size, and the largest body sent as one `PutObject`. */
export const DEFAULT_S3_PART_BYTES = 16 * 1024 * 1024;
/** Attempts per request (the SDK's standard retry mode) unless `AWS_MAX_ATTEMPTS` says. */
export const DEFAULT_S3_ATTEMPTS = 4;

/** Where an `s3://bucket/prefix` store lives. */
export interface S3Location {
  bucket: string;
  /** Key prefix without slashes at either end ("" for the bucket's root). */
  prefix: string;
}

const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** Parses `s3://bucket[/prefix]`; null when `spec` is not an `s3://` URL (a directory then). */
export function parseS3Location(spec: string): S3Location | null {
  if (!spec.startsWith("s3://")) return null;
  const rest = spec.slice("s3://".length);
  const slash = rest.indexOf("/");
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  const prefix = (slash < 0 ? "" : rest.slice(slash + 1)).replace(/^\/+|\/+$/g, "");
  if (!BUCKET_RE.test(bucket)) {
    throw new StoreError(`invalid S3 bucket name in ${JSON.stringify(spec)}`);
  }
  if (prefix !== "") assertKey(prefix);
  return { bucket, prefix };
}

export interface S3PackStoreOptions extends S3Location {
  /**
   * Client settings on top of the standard AWS environment and config (endpoint, region,
   * `forcePathStyle`, credentials: tests and `--s3-*` settings). Nothing here is logged.
   */
  client?: S3ClientConfig;
  /** Bytes per multipart part (at least `S3_MIN_PART_BYTES`); default `DEFAULT_S3_PART_BYTES`. */
  partBytes?: number;
  /** Counts every request sent (benches: store requests per clone). */
  onRequest?: (command: string) => void;
}

/** The MD5 hex of `bytes` (what S3 answers as the ETag of a single-part upload). */
function md5Hex(bytes: Uint8Array): string {
  return Array.from(md5(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

function base64(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

/** An ETag that is an MD5 of the content (quoted 32 hex digits), unquoted; else null. */
export function plainEtag(etag: string | undefined): string | null {
  const m = etag?.match(/^"?([0-9a-f]{32})"?$/i);
  return m ? m[1].toLowerCase() : null;
}

/** Whether the store answered an upload's ETag other than the MD5 of what was sent. */
export function etagMismatch(answered: string | undefined, sentMd5: string): boolean {
  const plain = plainEtag(answered);
  // An ETag that is not an MD5 (SSE-KMS, some gateways) cannot be checked: Content-MD5 was.
  return plain !== null && plain !== sentMd5;
}

interface SdkError {
  name?: string;
  Code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

function statusOf(error: unknown): number | undefined {
  return (error as SdkError)?.$metadata?.httpStatusCode;
}

function isNotFound(error: unknown): boolean {
  const e = error as SdkError;
  return statusOf(error) === 404 || e?.name === "NoSuchKey" || e?.name === "NotFound";
}

export class S3PackStore implements PackStore {
  readonly client: S3Client;
  readonly bucket: string;
  readonly prefix: string;
  readonly #partBytes: number;
  readonly #onRequest: ((command: string) => void) | undefined;

  constructor(options: S3PackStoreOptions) {
    const partBytes = options.partBytes ?? DEFAULT_S3_PART_BYTES;
    if (!Number.isInteger(partBytes) || partBytes < S3_MIN_PART_BYTES) {
      throw new StoreError(
        `S3 part size must be an integer of at least ${S3_MIN_PART_BYTES} bytes, got ${partBytes}`,
      );
    }
    this.bucket = options.bucket;
    this.prefix = options.prefix;
    this.#partBytes = partBytes;
    this.#onRequest = options.onRequest;
    this.client = new S3Client({
      retryMode: "standard",
      maxAttempts: Number(Deno.env.get("AWS_MAX_ATTEMPTS")) || DEFAULT_S3_ATTEMPTS,
      ...options.client,
    });
  }

  #key(key: string): string {
    assertKey(key);
    return this.prefix === "" ? key : `${this.prefix}/${key}`;
  }

  #unkey(full: string): string {
    return this.prefix === "" ? full : full.slice(this.prefix.length + 1);
  }

  /** Sends one command, turning failures into `StoreError`s that name the action (no secrets). */
  async #send<T>(action: string, command: { constructor: { name: string } }): Promise<T> {
    this.#onRequest?.(command.constructor.name);
    try {
      // deno-lint-ignore no-explicit-any
      return await this.client.send(command as any) as T;
    } catch (error) {
      throw storeError(action, error);
    }
  }

  async put(key: string, body: ReadableStream<Uint8Array>): Promise<{ size: number }> {
    const full = this.#key(key);
    let parts: Awaited<ReturnType<typeof firstPart>>;
    try {
      parts = await firstPart(body, this.#partBytes);
    } catch (error) {
      throw storeError(`reading the body for ${key}`, error);
    }
    const { first, rest } = parts;
    if (first.last) return await this.#putOne(full, key, first.bytes);
    return await this.#putMultipart(full, key, first, rest);
  }

  async putBuffer(key: string, bytes: Uint8Array): Promise<{ size: number }> {
    const full = this.#key(key);
    if (bytes.byteLength > this.#partBytes) {
      return await this.put(key, new Blob([bytes as Uint8Array<ArrayBuffer>]).stream());
    }
    return await this.#putOne(full, key, bytes);
  }

  async #putOne(full: string, key: string, bytes: Uint8Array): Promise<{ size: number }> {
    const digest = md5(bytes);
    const answer = await this.#send<{ ETag?: string }>(
      `putting ${key}`,
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: full,
        Body: bytes,
        ContentLength: bytes.byteLength,
        ContentMD5: base64(digest),
      }),
    );
    const sent = md5Hex(bytes);
    if (etagMismatch(answer.ETag, sent)) {
      // What is stored is not what was sent: remove it rather than leave it to be served.
      await this.delete(key).catch(() => {});
      throw new StoreError(`S3 store: ${key} was stored as ETag ${answer.ETag}, sent MD5 ${sent}`);
    }
    return { size: bytes.byteLength };
  }

  async #putMultipart(
    full: string,
    key: string,
    first: Part,
    rest: AsyncGenerator<Part, void, undefined>,
  ): Promise<{ size: number }> {
    let uploadId: string;
    try {
      const created = await this.#send<{ UploadId?: string }>(
        `starting a multipart upload of ${key}`,
        new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: full }),
      );
      if (!created.UploadId) throw new StoreError(`S3 store: no upload id for ${key}`);
      uploadId = created.UploadId;
    } catch (error) {
      await rest.return(undefined);
      throw error;
    }
    let size = 0;
    try {
      const done: { PartNumber: number; ETag: string }[] = [];
      const upload = async (bytes: Uint8Array) => {
        const partNumber = done.length + 1;
        const sent = md5Hex(bytes);
        const answer = await this.#send<{ ETag?: string }>(
          `uploading part ${partNumber} of ${key}`,
          new UploadPartCommand({
            Bucket: this.bucket,
            Key: full,
            UploadId: uploadId,
            PartNumber: partNumber,
            Body: bytes,
            ContentLength: bytes.byteLength,
            ContentMD5: base64(md5(bytes)),
          }),
        );
        if (!answer.ETag || etagMismatch(answer.ETag, sent)) {
          throw new StoreError(
            `S3 store: part ${partNumber} of ${key} stored as ETag ${answer.ETag}, sent MD5 ${sent}`,
          );
        }
        size += bytes.byteLength;
        done.push({ PartNumber: partNumber, ETag: answer.ETag });
      };
      await upload(first.bytes);
      for await (const part of rest) {
        if (part.bytes.byteLength > 0 || done.length === 0) await upload(part.bytes);
      }
      await this.#send(
        `completing the upload of ${key}`,
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: full,
          UploadId: uploadId,
          MultipartUpload: { Parts: done },
        }),
      );
      return { size };
    } catch (error) {
      // Release the source and drop the parts uploaded so far: nothing is published.
      await Promise.allSettled([
        rest.return(undefined),
        this.#send(
          `aborting the upload of ${key}`,
          new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: full, UploadId: uploadId }),
        ),
      ]);
      throw storeError(`multipart upload of ${key}`, error);
    }
  }

  async get(key: string, range?: ByteRange): Promise<StoredObject | null> {
    const full = this.#key(key);
    if (range) checkRange(key, range);
    if (range && range.length === 0) {
      const info = await this.head(key);
      if (!info) return null;
      if (range.offset > info.size) throw outside(key, range, info.size);
      return { body: emptyStream(), size: info.size };
    }
    const header = range
      ? `bytes=${range.offset}-${range.length === undefined ? "" : range.offset + range.length - 1}`
      : undefined;
    let answer: {
      Body?: { transformToWebStream(): ReadableStream<Uint8Array> };
      ContentLength?: number;
      ContentRange?: string;
      ETag?: string;
    };
    this.#onRequest?.("GetObjectCommand");
    try {
      answer = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: full, Range: header }),
      );
    } catch (error) {
      if (isNotFound(error)) return null;
      if (range && statusOf(error) === 416) {
        // Asked from the very end (or past it): empty, as a file read there, or out of range.
        const info = await this.head(key);
        if (!info) return null;
        if (range.offset === info.size) return { body: emptyStream(), size: info.size };
        throw outside(key, range, info.size);
      }
      throw storeError(`reading ${key}`, error);
    }
    if (!answer.Body) throw new StoreError(`S3 store: no body reading ${key}`);
    const total = answer.ContentRange?.match(/\/(\d+)$/)?.[1];
    const size = total !== undefined ? Number(total) : answer.ContentLength ?? 0;
    const stream = answer.Body.transformToWebStream();
    // A range the store ignored (a whole object answered) would hand out the wrong bytes.
    if (range && range.offset > 0 && answer.ContentRange === undefined) {
      await stream.cancel();
      throw new StoreError(`S3 store: the range of ${key} was not honoured`);
    }
    const etag = range ? null : plainEtag(answer.ETag);
    return { body: etag ? md5Checked(key, etag, stream) : stream, size };
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const full = this.#key(key);
    this.#onRequest?.("HeadObjectCommand");
    try {
      const answer = await this.client.send(
        new HeadObjectCommand({ Bucket: this.bucket, Key: full }),
      );
      return {
        key,
        size: answer.ContentLength ?? 0,
        modified: answer.LastModified?.getTime() ?? 0,
        version: answer.ETag,
      };
    } catch (error) {
      if (isNotFound(error)) return null;
      throw storeError(`inspecting ${key}`, error);
    }
  }

  async delete(key: string): Promise<void> {
    await this.#send(
      `deleting ${key}`,
      new DeleteObjectCommand({ Bucket: this.bucket, Key: this.#key(key) }),
    );
  }

  async list(prefix: string): Promise<ObjectInfo[]> {
    const full = this.prefix === "" ? prefix : `${this.prefix}/${prefix}`;
    const found: ObjectInfo[] = [];
    let token: string | undefined;
    do {
      const page = await this.#send<{
        Contents?: { Key?: string; Size?: number; LastModified?: Date; ETag?: string }[];
        IsTruncated?: boolean;
        NextContinuationToken?: string;
      }>(
        `listing ${prefix}`,
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: full, ContinuationToken: token }),
      );
      for (const o of page.Contents ?? []) {
        if (!o.Key) continue;
        found.push({
          key: this.#unkey(o.Key),
          size: o.Size ?? 0,
          modified: o.LastModified?.getTime() ?? 0,
          version: o.ETag,
        });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return found.sort((a, b) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  }

  /**
   * Aborts multipart uploads under `prefix` begun before `olderThan` (a node killed mid-put left
   * them: invisible, but billed). A store that cannot list them (501: some emulators and
   * gateways) answers 0: there, a bucket lifecycle rule (`AbortIncompleteMultipartUpload`) does it.
   */
  async sweepIncomplete(prefix: string, olderThan: number): Promise<number> {
    try {
      return await this.#sweepIncomplete(prefix, olderThan);
    } catch (error) {
      if (error instanceof StoreError && statusOf(error.cause) === 501) return 0;
      throw error;
    }
  }

  async #sweepIncomplete(prefix: string, olderThan: number): Promise<number> {
    const full = this.prefix === "" ? prefix : `${this.prefix}/${prefix}`;
    let removed = 0;
    let keyMarker: string | undefined;
    let idMarker: string | undefined;
    do {
      const page = await this.#send<{
        Uploads?: { Key?: string; UploadId?: string; Initiated?: Date }[];
        IsTruncated?: boolean;
        NextKeyMarker?: string;
        NextUploadIdMarker?: string;
      }>(
        `listing unfinished uploads under ${prefix}`,
        new ListMultipartUploadsCommand({
          Bucket: this.bucket,
          Prefix: full,
          KeyMarker: keyMarker,
          UploadIdMarker: idMarker,
        }),
      );
      for (const u of page.Uploads ?? []) {
        if (!u.Key || !u.UploadId || (u.Initiated?.getTime() ?? 0) >= olderThan) continue;
        await this.#send(
          `aborting an unfinished upload of ${this.#unkey(u.Key)}`,
          new AbortMultipartUploadCommand({
            Bucket: this.bucket,
            Key: u.Key,
            UploadId: u.UploadId,
          }),
        );
        removed++;
      }
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      idMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
    } while (keyMarker !== undefined);
    return removed;
  }
}

function checkRange(key: string, range: ByteRange): void {
  if (!Number.isInteger(range.offset) || range.offset < 0) {
    throw new StoreError(`invalid range offset ${range.offset} for ${key}`);
  }
  if (range.length !== undefined && (!Number.isInteger(range.length) || range.length < 0)) {
    throw new StoreError(`invalid range length ${range.length} for ${key}`);
  }
}

function outside(key: string, range: ByteRange, size: number): StoreError {
  return new StoreError(`range offset ${range.offset} outside ${key} (${size} bytes)`);
}

function emptyStream(): ReadableStream<Uint8Array> {
  return new ReadableStream({ start: (c) => c.close() });
}

/**
 * `source`'s bytes, erroring at their end unless their MD5 is `etag`. Read by hand rather than
 * piped: a pipe would cancel the finished source with the error, which the SDK's body re-emits
 * as an unhandled stream error.
 */
export function md5Checked(
  key: string,
  etag: string,
  source: ReadableStream<Uint8Array>,
): ReadableStream<Uint8Array> {
  const hash = md5.create();
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const r = await reader.read();
      if (!r.done) {
        hash.update(r.value);
        controller.enqueue(r.value);
        return;
      }
      const got = Array.from(hash.digest(), (b) => b.toString(16).padStart(2, "0")).join("");
      if (got !== etag) {
        controller.error(new StoreError(`S3 store: ${key} read back as MD5 ${got}, ETag ${etag}`));
      } else controller.close();
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

function storeError(action: string, cause: unknown): StoreError {
  if (cause instanceof StoreError) return cause;
  const e = cause as SdkError;
  const status = statusOf(cause);
  const detail = `${e?.name ?? "Error"}${status ? ` (HTTP ${status})` : ""}: ${
    e?.message ?? String(cause)
  }`;
  return new StoreError(`S3 store: ${action} failed: ${detail}`, { cause });
}
