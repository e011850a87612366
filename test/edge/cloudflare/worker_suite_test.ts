/** The shared end-to-end edge suite (`test/proxy/edge_suite.ts`) against the Worker in workerd. */
import { edgeSuite } from "../../proxy/edge_suite.ts";
import { MINIFLARE_LEAKS, workerEdgeFactory } from "../../support/worker_harness.ts";
import { gitBuilds } from "../../support/git_builds.ts";

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
for (const g of (await gitBuilds()).builds) {
  edgeSuite(workerEdgeFactory, "worker", { origin: g, client: g }, MINIFLARE_LEAKS);
}
