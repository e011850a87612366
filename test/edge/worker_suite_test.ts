/** The shared end-to-end edge suite (`test/proxy/edge_suite.ts`) against the Worker in workerd. */
import { edgeSuite } from "../proxy/edge_suite.ts";
import { workerEdgeFactory } from "./worker_harness.ts";

edgeSuite(workerEdgeFactory, "worker");
