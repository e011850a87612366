/**
 * The client/origin matrix (`test/proxy/matrix_suite.ts`) against the Worker in workerd: each git
 * as both origin and client, the operations most likely to differ by runtime (the full matrix
 * runs on the Deno server; the protocol handling is shared).
 */
import { matrixSuite } from "../../proxy/matrix_suite.ts";
import { MINIFLARE_LEAKS, workerEdgeFactory } from "../../support/worker_harness.ts";

matrixSuite(workerEdgeFactory, "worker", {
  samePairsOnly: true,
  ops: [
    "clone",
    "clone --single-branch",
    "clone --depth 1",
    "clone --filter=blob:none + lazy",
    "fetch after the origin moved",
    "push",
    "clone --mirror, transfer.bundleURI",
    "clone SHA-256",
  ],
  testOptions: MINIFLARE_LEAKS,
});
