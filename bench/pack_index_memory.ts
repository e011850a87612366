/**
 * Memory of a pack scan's entry index: the compact {@link PackEntryTable} against one
 * `PackEntry` object per entry (the representation scans used to keep), and the compact index
 * followed by a 4-way split into discarded sinks (peak RSS of a whole snapshot build). Each mode runs in its
 * own process on the same fast-import pack of tiny blobs; heap figures (JS heap plus external
 * memory) are taken after a full GC.
 *
 *   deno run -A bench/pack_index_memory.ts [--objects 200000]
 */
import type { PackEntry } from "../src/git/pack.ts";
import { scanPack } from "../src/git/pack_reader.ts";
import { planSplit, splitPack } from "../src/git/pack_split.ts";
import { tempDir } from "../test/support/git.ts";
import { tinyBlobPack } from "../test/support/pack_fixtures.ts";
import { type Cell, flags, peakRssMiB, printResult } from "./harness/mod.ts";

const MiB = 2 ** 20;

/**
 * JS heap plus external memory (typed arrays' backing stores live outside the heap) and RSS,
 * after a full collection (needs `--expose-gc`).
 */
function settled(): { heap: number; rss: number } {
  (globalThis as unknown as { gc(): void }).gc();
  const { heapUsed, external, rss } = Deno.memoryUsage();
  return { heap: heapUsed + external, rss };
}

/** Splits the pack at `path` into `parts` discarded parts, like a snapshot build. */
async function split(path: string, summary: Awaited<ReturnType<typeof scanPack>>, parts: number) {
  const plan = planSplit(summary.index, parts);
  using source = await Deno.open(path);
  await splitPack(source.readable, summary, plan, plan.parts.map(() => new WritableStream()));
}

/** Child: scans `path`, keeping entries as `mode` says, and prints the memory figures. */
async function measure(path: string, mode: string): Promise<void> {
  const kept: PackEntry[] = [];
  const before = settled();
  using file = await Deno.open(path);
  const summary = await scanPack(
    file.readable,
    mode === "objects" ? { keepEntries: false, onEntry: (e) => kept.push(e) } : {},
  );
  const after = settled();
  if (mode === "compact+split") await split(path, summary, 4);
  const held = mode === "objects" ? kept.length : summary.index.length;
  console.log(JSON.stringify({
    mode,
    objects: held,
    heapMiB: (after.heap - before.heap) / MiB,
    rssMiB: after.rss / MiB,
    rssGrowthMiB: (after.rss - before.rss) / MiB,
    peakRssMiB: peakRssMiB(),
  }));
}

if (Deno.args[0] === "--child") {
  await measure(Deno.args[1], Deno.args[2]);
} else {
  const objects = flags.number("objects", 200_000);
  await using dir = await tempDir();
  const path = await tinyBlobPack(`${dir.path}/repo`, objects);
  const rows: Cell[][] = [];
  for (const mode of ["objects", "compact", "compact+split"]) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--v8-flags=--expose-gc", import.meta.filename!, "--child", path, mode],
      stderr: "inherit",
    }).output();
    if (!out.success) throw new Error(`${mode} run failed`);
    const r = JSON.parse(new TextDecoder().decode(out.stdout));
    rows.push([
      mode,
      r.objects,
      r.heapMiB.toFixed(1),
      ((r.heapMiB * MiB) / r.objects).toFixed(1),
      r.rssMiB.toFixed(1),
      r.rssGrowthMiB.toFixed(1),
      r.peakRssMiB.toFixed(1),
    ]);
  }
  printResult({
    title: `pack scan entry index memory: ${objects} tiny blobs, each mode in its own process`,
    headers: [
      "mode",
      "entries",
      "heap+external MiB",
      "B/entry",
      "RSS MiB",
      "RSS growth MiB",
      "peak RSS MiB",
    ],
    rows,
    ratios: [
      `objects / compact bytes per entry: ${(Number(rows[0][3]) / Number(rows[1][3])).toFixed(1)}x`,
    ],
  });
}
