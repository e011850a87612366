/**
 * Git LFS through the Worker in workerd: a clone, the second clone from R2, a private repository,
 * a truncated origin download and two repositories sharing an object (`lfs_suite.ts`).
 */
import { lfsSuite } from "../../proxy/lfs_suite.ts";
import { MINIFLARE_LEAKS, workerEdgeFactory } from "../../support/worker_harness.ts";

// Miniflare itself leaks on dispose.
lfsSuite(
  workerEdgeFactory,
  "worker",
  ["clone", "private", "truncated", "corrupt", "shared"],
  MINIFLARE_LEAKS,
);
