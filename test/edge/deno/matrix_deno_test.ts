/**
 * The client/origin matrix on the Deno server. `GITEDGE_MATRIX=full` adds the cold cells without
 * `fetch.uriProtocols` (passed through; the warm ones may be streamed from the snapshot).
 */
import { matrixSuite } from "../../proxy/matrix_suite.ts";
import { denoEdgeFactory } from "../../support/edge.ts";

matrixSuite(denoEdgeFactory, "deno", { coldPlain: Deno.env.get("GITEDGE_MATRIX") === "full" });
