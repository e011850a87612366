/**
 * Test fixture Worker: exposes `R2PackStore` over HTTP so `r2_store_test.ts` can drive it inside
 * workerd against Miniflare's local R2. Counts the bucket calls the store makes, so tests can see
 * which upload path was taken.
 *
 *   PUT    /objects/<key>?part=<bytes>&fail_after=<bytes>  → { size, calls }
 *   GET    /objects/<key>?offset=&length=                  → bytes, `x-object-size`
 *   GET    /info/<key>                                     → ObjectInfo | null
 *   DELETE /objects/<key>                                  → 204
 *   GET    /list?prefix=&page=                             → { objects, calls }
 *   POST   /fill?prefix=&count=                            → writes `count` tiny objects
 */
import { R2PackStore } from "../../../edge/cloudflare/r2_store.ts";
import type { R2Bucket, R2MultipartUpload } from "../../../edge/cloudflare/worker_types.ts";
import { StoreError } from "../../../src/storage/store.ts";

interface FixtureEnv {
  BUCKET: R2Bucket;
}

/** How many times each bucket operation ran during one request. */
type Calls = Record<string, number>;

/** Wraps a bucket, counting calls to it and to the multipart uploads it creates. */
function countingBucket(bucket: R2Bucket, calls: Calls): R2Bucket {
  const count = (name: string) => calls[name] = (calls[name] ?? 0) + 1;
  const countingUpload = (upload: R2MultipartUpload): R2MultipartUpload => ({
    get key() {
      return upload.key;
    },
    get uploadId() {
      return upload.uploadId;
    },
    uploadPart: (n, value) => (count("uploadPart"), upload.uploadPart(n, value)),
    abort: () => (count("abort"), upload.abort()),
    complete: (parts) => (count("complete"), upload.complete(parts)),
  });
  return {
    head: (key) => (count("head"), bucket.head(key)),
    get: (key, options) => (count("get"), bucket.get(key, options)),
    put: (key, value) => (count("put"), bucket.put(key, value)),
    delete: (keys) => (count("delete"), bucket.delete(keys)),
    list: (options) => (count("list"), bucket.list(options)),
    createMultipartUpload: async (key) => {
      count("createMultipartUpload");
      return countingUpload(await bucket.createMultipartUpload(key));
    },
  };
}

/** The request body as the store reads it, and a way to finish reading it afterwards. */
interface StoreSource {
  /** What the store is given: the body, erroring after `limit` bytes when a limit is set. */
  stream: ReadableStream<Uint8Array>;
  /** Reads and discards whatever of the request body the store left unread. */
  drain(): Promise<void>;
}

/**
 * Wraps the request body for the store. When the store gives up early (a failing source, a
 * refused key) the fixture still reads the rest of the body before answering: workerd closes a
 * connection whose request body was left unread, and the kernel then resets it, which can
 * destroy the answer before the client has read it.
 */
function storeSource(body: ReadableStream<Uint8Array>, limit?: number): StoreSource {
  const reader = body.getReader();
  let seen = 0;
  let released = false;
  // workerd allows one pending read on a request body: `drain` waits for the store's last one.
  let lastRead: Promise<ReadableStreamReadResult<Uint8Array>> | null = null;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      lastRead = reader.read();
      const { done, value } = await lastRead;
      if (released) return;
      if (done) return controller.close();
      if (limit !== undefined && seen + value.byteLength > limit) {
        released = true;
        controller.error(new Error(`source failed after ${limit} bytes`));
        return;
      }
      seen += value.byteLength;
      controller.enqueue(value);
    },
    cancel() {
      // Leave the request body to `drain`: cancelling it would also cut the connection.
      released = true;
    },
  }, { highWaterMark: 0 });
  const drain = async () => {
    released = true;
    let result = await (lastRead ?? reader.read());
    while (!result.done) result = await reader.read();
  };
  return { stream, drain };
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

function numberParam(url: URL, name: string): number | undefined {
  const raw = url.searchParams.get(name);
  return raw === null ? undefined : Number(raw);
}

async function route(request: Request, env: FixtureEnv): Promise<Response> {
  const url = new URL(request.url);
  const calls: Calls = {};
  const store = new R2PackStore(countingBucket(env.BUCKET, calls), {
    partBytes: numberParam(url, "part"),
    listPageSize: numberParam(url, "page"),
  });
  const [, area, ...rest] = url.pathname.split("/");
  const key = rest.join("/");
  if (area === "objects" && request.method === "PUT") {
    const source = storeSource(
      request.body ?? new Blob([]).stream(),
      numberParam(url, "fail_after"),
    );
    try {
      return json({ ...(await store.put(key, source.stream)), calls });
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      return json({ error: error.name, message: error.message, calls }, 500);
    } finally {
      await source.drain();
    }
  }
  if (area === "objects" && request.method === "GET") {
    const offset = numberParam(url, "offset");
    const length = numberParam(url, "length");
    const object = await store.get(key, offset === undefined ? undefined : { offset, length });
    if (object === null) return new Response("no such object", { status: 404 });
    return new Response(object.body, { headers: { "x-object-size": String(object.size) } });
  }
  if (area === "objects" && request.method === "DELETE") {
    await store.delete(key);
    return new Response(null, { status: 204 });
  }
  if (area === "info") return json(await store.head(key));
  if (area === "list") {
    return json({ objects: await store.list(url.searchParams.get("prefix") ?? ""), calls });
  }
  if (area === "fill" && request.method === "POST") {
    const prefix = url.searchParams.get("prefix") ?? "";
    const count = numberParam(url, "count") ?? 0;
    for (let i = 0; i < count; i++) {
      await env.BUCKET.put(`${prefix}${String(i).padStart(4, "0")}`, `object ${i}`);
    }
    return new Response(null, { status: 204 });
  }
  return new Response("no such route", { status: 404 });
}

export default {
  async fetch(request: Request, env: FixtureEnv): Promise<Response> {
    try {
      return await route(request, env);
    } catch (error) {
      const e = error instanceof Error ? error : new Error(String(error));
      return json({ error: e.name, message: e.message }, 500);
    }
  },
};
