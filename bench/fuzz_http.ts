/**
 * The HTTP fuzz of `test/proxy/fuzz_http.ts`, longer: inputs/s, the status histogram (`/origin`
 * marks inputs that reached the origin) and every failing seed.
 *
 * Usage: deno run --allow-all bench/fuzz_http.ts [--inputs 1000000] [--seed 1]
 */
import { formatHistogram, runFuzz, startFuzzWorld } from "../test/proxy/fuzz_http.ts";

function flag(name: string, dflt: number): number {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
}

const inputs = flag("inputs", 1_000_000);
const seed = flag("seed", 1);
await using world = await startFuzzWorld();
const report = await runFuzz(world, { inputs, seed, perInputMs: 60_000, maxFailures: 1000 });
console.log(
  `fuzz_http: ${report.inputs} inputs (seed ${seed}) in ${(report.ms / 1000).toFixed(1)} s, ` +
    `${
      Math.round(report.inputs / (report.ms / 1000))
    } inputs/s, ${report.originCalls} reached the origin`,
);
console.log(formatHistogram(report.histogram));
for (const f of report.failures) console.log(`FAIL seed ${f.seed} (${f.kind}): ${f.what}`);
if (report.failures.length > 0) Deno.exitCode = 1;
