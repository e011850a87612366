/** The tag digest from the clone's own `ls-refs` (src/proxy/origin/tag_listings.ts) on the Worker. */
import { depthHitsAskOneLsRefs } from "../../proxy/tag_listings_suite.ts";
import { MINIFLARE_LEAKS, workerEdgeFactory } from "../../support/worker_harness.ts";

Deno.test({
  name: "worker: a --depth 1 cache hit asks the origin one ls-refs, and a new tag is in the clone",
  ...MINIFLARE_LEAKS,
  fn: () => depthHitsAskOneLsRefs(workerEdgeFactory),
});
