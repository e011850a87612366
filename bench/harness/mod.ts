/**
 * The benches' one harness: flags, stats (the one median), /proc readings, the edge and origin
 * processes, the repositories, and the table every bench prints.
 */
export { Flags, flags } from "./flags.ts";
export { interleaved, median, settleDisk, timed } from "./stats.ts";
export {
  childPids,
  cpuSeconds,
  cpuTimes,
  loadavg,
  openFds,
  peakRssMiB,
  type Pid,
  rssMiB,
} from "./proc.ts";
export {
  edgeHelp,
  type EdgeProcess,
  type OriginProcess,
  type OriginStatsLine,
  spawnOrigin,
  startEdgeProcess,
} from "./processes.ts";
export { bareFromBundle, bytesUnder, GIT_BUNDLE, packStats, warmEdge } from "./repos.ts";
export {
  type BenchTable,
  type Cell,
  formatResult,
  markdownTable,
  printResult,
  ratio,
} from "./table.ts";
