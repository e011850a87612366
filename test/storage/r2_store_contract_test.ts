/**
 * The store contract (store_contract.ts) on the Worker's R2 store, with a real R2 binding of
 * workerd through Miniflare (its 5 MiB parts, so the large object goes multipart).
 */
import { Miniflare } from "miniflare";
import { R2_MIN_PART_BYTES, R2PackStore } from "../../edge/cloudflare/r2_store.ts";
import type { R2Bucket } from "../../edge/cloudflare/worker_types.ts";
import { MINIFLARE_LEAKS } from "../support/worker_harness.ts";
import { storeContract } from "./store_contract.ts";

let opened = 0;

storeContract("r2", async () => {
  const miniflare = new Miniflare({
    modules: true,
    script: "export default { fetch() { return new Response(''); } }",
    r2Buckets: [`B${++opened}`],
    cf: false,
  });
  const bucket = await miniflare.getR2Bucket(`B${opened}`) as unknown as R2Bucket;
  return {
    store: new R2PackStore(bucket, { partBytes: R2_MIN_PART_BYTES }),
    [Symbol.asyncDispose]: () => miniflare.dispose(),
  };
}, {
  largeBytes: 11 * 1024 * 1024,
  // R2 refuses a range from the very end as not satisfiable, where the others read it empty.
  strictRanges: false,
  // Miniflare itself leaks on dispose.
  testOptions: { ...MINIFLARE_LEAKS },
});
