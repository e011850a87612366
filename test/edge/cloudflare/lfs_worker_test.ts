/**
 * Git LFS through the Worker in workerd (`lfs_suite.ts`): a clone, the second clone from R2, a
 * private repository, a corrupt origin download (`crypto.DigestStream` checks the content, R2
 * publishes no refused fill). The other cases are the same code on the Deno server.
 */
import { lfsSuite } from "../../proxy/lfs_suite.ts";
import { MINIFLARE_LEAKS, workerEdgeFactory } from "../../support/worker_harness.ts";

// Miniflare itself leaks on dispose.
lfsSuite(
  workerEdgeFactory,
  "worker",
  ["clone", "private", "corrupt"],
  MINIFLARE_LEAKS,
);
