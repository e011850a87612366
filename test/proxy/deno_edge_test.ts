import { edgeSuite } from "./edge_suite.ts";
import { denoEdgeFactory } from "../support/edge.ts";

edgeSuite(denoEdgeFactory, "deno");
