/**
 * Counting the subrequests a Durable Object makes: every R2 binding call (multipart part uploads
 * included) and every outgoing fetch counts against the platform's per-invocation limit (1,000 on
 * the Paid plan). Builds record the most one invocation made (`lastBuild` in the status).
 */
import type { R2Bucket, R2MultipartUpload } from "./worker_types.ts";

/** A running count of subrequests. */
export class SubrequestCounter {
  #count = 0;

  /** Subrequests counted so far. */
  get count(): number {
    return this.#count;
  }

  /** Counts one subrequest made by `call`. */
  counted<T>(call: () => Promise<T>): Promise<T> {
    this.#count++;
    return call();
  }

  /** `fetch` counted. */
  fetch(fetcher: (request: Request) => Promise<Response>): (request: Request) => Promise<Response> {
    return (request) => this.counted(() => fetcher(request));
  }

  /** `bucket` with every call counted, including those on its multipart uploads. */
  bucket(bucket: R2Bucket): R2Bucket {
    const upload = (u: R2MultipartUpload): R2MultipartUpload => ({
      get key() {
        return u.key;
      },
      get uploadId() {
        return u.uploadId;
      },
      uploadPart: (n, value) => this.counted(() => u.uploadPart(n, value)),
      abort: () => this.counted(() => u.abort()),
      complete: (parts) => this.counted(() => u.complete(parts)),
    });
    return {
      head: (key) => this.counted(() => bucket.head(key)),
      get: (key, options) => this.counted(() => bucket.get(key, options)),
      put: (key, value) => this.counted(() => bucket.put(key, value)),
      delete: (keys) => this.counted(() => bucket.delete(keys)),
      list: (options) => this.counted(() => bucket.list(options)),
      createMultipartUpload: async (key) =>
        upload(await this.counted(() => bucket.createMultipartUpload(key))),
    };
  }
}
