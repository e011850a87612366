/** Git LFS through the Deno server: every case of `lfs_suite.ts`. */
import { lfsSuite } from "../../proxy/lfs_suite.ts";
import { denoEdgeFactory } from "../../support/edge.ts";

lfsSuite(denoEdgeFactory, "deno", [
  "clone",
  "pull-fetch-all",
  "push-locks",
  "private",
  "deleted",
  "truncated",
  "corrupt",
  "shared",
  "bad-input",
]);
