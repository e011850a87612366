/**
 * The slice of the Cloudflare Workers runtime API that gitedge uses, declared locally.
 *
 * `@cloudflare/workers-types` installs from npm but declares its own `Request`, `Response`,
 * `ReadableStream` and friends as globals, which collide with Deno's built-in types under
 * `deno check`. These interfaces describe only what the Worker code calls, with the shapes the
 * runtime documents, and are plain types: nothing here exists at run time. The one runtime value
 * gitedge imports, the `DurableObject` base class, is declared in `cloudflare_workers.d.ts`.
 */

/** Body types R2 accepts for `put` and `uploadPart`. */
export type R2Value = ReadableStream<Uint8Array> | ArrayBuffer | ArrayBufferView | string | Blob;

/** A byte range for `R2Bucket.get`. */
export type R2Range = { offset: number; length?: number } | { suffix: number };

/** Metadata of a stored R2 object. */
export interface R2Object {
  readonly key: string;
  readonly size: number;
  readonly etag: string;
  readonly uploaded: Date;
}

/** An R2 object together with its (possibly ranged) body. */
export interface R2ObjectBody extends R2Object {
  readonly body: ReadableStream<Uint8Array>;
}

/** One page of an `R2Bucket.list` result. */
export type R2Objects =
  & { objects: R2Object[]; delimitedPrefixes: string[] }
  & ({ truncated: true; cursor: string } | { truncated: false });

export interface R2ListOptions {
  prefix?: string;
  cursor?: string;
  limit?: number;
}

export interface R2UploadedPart {
  partNumber: number;
  etag: string;
}

/** An in-progress multipart upload: the object appears only on `complete`. */
export interface R2MultipartUpload {
  readonly key: string;
  readonly uploadId: string;
  uploadPart(partNumber: number, value: R2Value): Promise<R2UploadedPart>;
  abort(): Promise<void>;
  complete(parts: R2UploadedPart[]): Promise<R2Object>;
}

/** An R2 bucket binding. */
export interface R2Bucket {
  head(key: string): Promise<R2Object | null>;
  get(key: string, options?: { range?: R2Range }): Promise<R2ObjectBody | null>;
  put(key: string, value: R2Value | null): Promise<R2Object | null>;
  delete(keys: string | string[]): Promise<void>;
  list(options?: R2ListOptions): Promise<R2Objects>;
  createMultipartUpload(key: string): Promise<R2MultipartUpload>;
}

/** Identifies one Durable Object instance. */
export interface DurableObjectId {
  toString(): string;
}

/**
 * A Durable Object namespace binding. `Rpc` is the object's RPC surface: `get` returns a stub (a
 * client-side handle) on which each of those methods runs in the object, returning a promise.
 */
export interface DurableObjectNamespace<Rpc> {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId): Rpc;
}

/** Transactional, strongly consistent storage private to one Durable Object. */
export interface DurableObjectStorage {
  get<T>(key: string): Promise<T | undefined>;
  put<T>(key: string, value: T): Promise<void>;
  put<T>(entries: Record<string, T>): Promise<void>;
  delete(key: string): Promise<boolean>;
  getAlarm(): Promise<number | null>;
  setAlarm(scheduledTime: number | Date): Promise<void>;
  deleteAlarm(): Promise<void>;
}

/** What the runtime hands a Durable Object's constructor. */
export interface DurableObjectState {
  readonly id: DurableObjectId;
  readonly storage: DurableObjectStorage;
  waitUntil(promise: Promise<unknown>): void;
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}

/** The per-request context of a Worker invocation. */
export interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException(): void;
}

/** The default export of a module Worker. */
export interface ExportedHandler<Env> {
  fetch?(request: Request, env: Env, ctx: ExecutionContext): Response | Promise<Response>;
}
