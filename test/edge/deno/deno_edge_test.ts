import { edgeSuite } from "../../proxy/edge_suite.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { gitBuilds } from "../../support/git_builds.ts";

for (const g of (await gitBuilds()).builds) {
  edgeSuite(denoEdgeFactory, "deno", { origin: g, client: g });
}
