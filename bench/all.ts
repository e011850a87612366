/**
 * Runs every bench, one after another, each in its own process (so one's memory does not colour
 * another's figures). The words before the first flag pick benches; the flags go to every bench
 * (each ignores those it does not know), e.g. `--runs 1`.
 *
 *   deno task bench                     # all of them
 *   deno task bench pack edge --runs 1  # only benches whose file name contains one of the words
 */
const BENCHES = [
  "pack_bench.ts",
  "pack_index_memory.ts",
  "parallel_uris.ts",
  "edge_uris.ts",
  "edge_clone.ts",
  "worker_vs_deno.ts",
  "worker_build.ts",
  "snapshot_stream_cpu.ts",
  "wrangler_dev.ts",
  "warm_floor.ts",
  "ci_burst.ts",
  "deno_front.ts",
  "wan.ts",
  "lfs.ts",
  "bundles.ts",
  "access_oracle.ts",
  "fleet.ts",
  "mirror_layers.ts",
];

const firstFlag = Deno.args.findIndex((a) => a.startsWith("-"));
const words = firstFlag < 0 ? Deno.args : Deno.args.slice(0, firstFlag);
const flags = firstFlag < 0 ? [] : Deno.args.slice(firstFlag);
let failed = 0;
for (const file of BENCHES) {
  if (words.length && !words.some((w) => file.includes(w))) continue;
  console.log(`\n=== bench/${file} ${flags.join(" ")}`);
  const { code } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", new URL(file, import.meta.url).pathname, ...flags],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (code !== 0) {
    console.log(`bench/${file} exited with ${code}`);
    failed++;
  }
}
Deno.exit(failed ? 1 : 0);
