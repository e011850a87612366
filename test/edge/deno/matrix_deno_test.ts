/**
 * The client/origin matrix on the Deno server. `GITEDGE_MATRIX=full` adds the cold cells without
 * `fetch.uriProtocols` (they repeat the warm ones: such fetches pass through either way).
 */
import { matrixSuite } from "../../proxy/matrix_suite.ts";
import { denoEdgeFactory } from "../../support/edge.ts";

matrixSuite(denoEdgeFactory, "deno", { coldPlain: Deno.env.get("GITEDGE_MATRIX") === "full" });
