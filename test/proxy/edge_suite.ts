/**
 * End-to-end cases for an edge in front of a real `git http-backend` origin, driven by stock git.
 * Registered once per runtime: `edgeSuite(denoEdgeFactory)` and `edgeSuite(workerEdgeFactory)`.
 * The cases live in parts by concern (edge_snapshot_suite.ts, edge_cache_suite.ts,
 * edge_protocol_suite.ts, edge_access_suite.ts); their world and helpers in edge_world.ts.
 */
import type { EdgeFactory } from "../support/edge.ts";
import { type SuiteGits, suiteOf } from "./edge_world.ts";
import { snapshotCases } from "./edge_snapshot_suite.ts";
import { cacheCases } from "./edge_cache_suite.ts";
import { protocolCases } from "./edge_protocol_suite.ts";
import { accessCases } from "./edge_access_suite.ts";

// Shared with the benches and other tests; re-exported for those that take them from here.
export { tracedGit, URI_CLONE, urisFetched } from "../support/traced_git.ts";
export { gitsLabel, type SuiteGits, warm } from "./edge_world.ts";

export function edgeSuite(
  factory: EdgeFactory,
  runtime: string,
  gits: SuiteGits,
  testOptions: Pick<Deno.TestDefinition, "sanitizeOps" | "sanitizeResources"> = {},
): void {
  const suite = suiteOf(factory, runtime, gits, testOptions);
  snapshotCases(suite);
  cacheCases(suite);
  protocolCases(suite);
  accessCases(suite);
}
