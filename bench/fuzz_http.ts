/**
 * The HTTP fuzz of `test/proxy/fuzz_http.ts`, longer: inputs/s, the status histogram (`/origin`
 * marks inputs that reached the origin) and every failing seed.
 *
 * Usage: deno run --allow-all bench/fuzz_http.ts [--inputs 1000000] [--seed 1]
 */
import { runFuzz, startFuzzWorld } from "../test/proxy/fuzz_http.ts";
import { flags, printResult } from "./harness/mod.ts";

const inputs = flags.number("inputs", 1_000_000);
const seed = flags.number("seed", 1);
await using world = await startFuzzWorld();
const report = await runFuzz(world, { inputs, seed, perInputMs: 60_000, maxFailures: 1000 });
const seconds = report.ms / 1000;
printResult({
  title: `fuzz_http: ${report.inputs} inputs (seed ${seed}) in ${seconds.toFixed(1)} s, ` +
    `${Math.round(report.inputs / seconds)} inputs/s, ${report.originCalls} reached the origin`,
  headers: ["status (/origin: reached it)", "inputs"],
  rows: [...report.histogram].sort((a, b) => b[1] - a[1]),
  ratios: report.failures.map((f) => `FAIL seed ${f.seed} (${f.kind}): ${f.what}`),
});
if (report.failures.length > 0) Deno.exitCode = 1;
