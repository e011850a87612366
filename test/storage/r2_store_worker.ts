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
import { R2PackStore } from "../../edge/r2_store.ts";
import type { R2Bucket, R2MultipartUpload } from "../../edge/worker_types.ts";
import { StoreError } from "../../src/storage/store.ts";

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

/** Passes `limit` bytes through, then errors the stream. */
function failAfter(limit: number): TransformStream<Uint8Array, Uint8Array> {
  let seen = 0;
  return new TransformStream({
    transform(chunk, controller) {
      if (seen + chunk.byteLength > limit) {
        controller.error(new Error(`source failed after ${limit} bytes`));
        return;
      }
      seen += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
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
    const failAt = numberParam(url, "fail_after");
    const body = request.body ?? new Blob([]).stream();
    const source = failAt === undefined ? body : body.pipeThrough(failAfter(failAt));
    try {
      return json({ ...(await store.put(key, source)), calls });
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      return json({ error: error.name, message: error.message, calls }, 500);
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
