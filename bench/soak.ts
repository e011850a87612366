/**
 * The soak at full size: `deno run -A bench/soak.ts [--clones 200] [--concurrency 4]`.
 * Clones of every kind (cold, warm by URI, shallow, blob:none, fetch into an existing clone)
 * through a real `gitedge serve` process in front of a real `git http-backend` origin that gets
 * pushes meanwhile, with an edge restart in the middle. Prints counts by kind, failures, clones
 * cut by the restart (each retried), fsck results, origin requests and wall time; exits 1 on any
 * failure other than a cut.
 */
import { formatSoak, runSoak } from "../test/support/soak.ts";
import { flags } from "./harness/mod.ts";

const clones = flags.number("clones", 200);
const concurrency = flags.number("concurrency", 4);
const report = await runSoak({ clones, concurrency, log: (l) => console.error(l) });
console.log(formatSoak(report));
if (report.failures.length > 0) Deno.exit(1);
