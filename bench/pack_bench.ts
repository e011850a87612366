/**
 * Pack pipeline benchmark, on two packs: a synthetic one (compressible text with history, fresh
 * text files and incompressible blobs; `--window=0`, so only the deltas fast-import wrote for the
 * edited files, few objects, big ones) and git's own history to v2.0.0
 * (`/work/shared/data/git-v2.0.0.bundle`: real delta chains, 165k mostly small objects).
 *
 * Verifying a pack, competitors interleaved round by round (medians of `--runs`):
 *   - `scanPack` (ours): entry structure, each entry's zlib stream and inflated size, OFS_DELTA
 *     bases, the trailer SHA-1; it decodes deflate without producing output and hashes no object.
 *   - inflate baseline (ours, same verdict): inflates every entry (fflate) and checks its size,
 *     SHA-1 of the pack; given the entry boundaries for free, so a lower bound of that approach.
 *   - `git verify-pack`: more work: also resolves every delta and hashes every object against the
 *     .idx. Its ratio is "how much less the edge's check costs", not "the same work, faster".
 *   - `git index-pack` (inflates, resolves, hashes, writes an .idx) is printed for reference only:
 *     nothing here does the same work, so no ratio.
 * Then `splitPack` into 8 parts (ours; no competitor) and our peak RSS.
 *
 * Usage: deno run --allow-all bench/pack_bench.ts [--mb 200] [--runs 3] [--pack synthetic,git]
 *
 * The synthetic pack is built once with fast-import and cached under $TMPDIR/gitedge-bench/; the
 * git pack is cut out of the bundle once into the same place.
 */

import { sha1 } from "@noble/hashes/legacy.js";
import { unzlibSync } from "fflate";
import { scanPack } from "../src/git/pack_reader.ts";
import type { PackEntryTable } from "../src/git/pack_entries.ts";
import { planSplit, splitPack } from "../src/git/pack_split.ts";
import {
  type Cell,
  flags,
  GIT_BUNDLE,
  interleaved,
  loadavg,
  median,
  printResult,
  ratio,
  timed,
} from "./harness/mod.ts";

const GIT_ENV = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "bench",
  GIT_AUTHOR_EMAIL: "bench@gitedge.invalid",
  GIT_COMMITTER_NAME: "bench",
  GIT_COMMITTER_EMAIL: "bench@gitedge.invalid",
};

const encoder = new TextEncoder();

async function run(args: string[], cwd?: string): Promise<void> {
  const out = await new Deno.Command("git", {
    args,
    cwd,
    env: GIT_ENV,
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`git ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** Deterministic xorshift generator for word choices. */
function xorshift(seed: number): () => number {
  let s = seed | 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return s >>> 0;
  };
}

const WORDS = ("pack delta object tree commit blob zlib offset edge cache proxy clone fetch " +
  "window huffman stream chunk split index verify trailer header varint base chain").split(" ");

function text(bytes: number, next: () => number): Uint8Array {
  const lines: string[] = [];
  let size = 0;
  while (size < bytes) {
    const n = 4 + (next() % 10);
    let line = "";
    for (let i = 0; i < n; i++) line += WORDS[next() % WORDS.length] + " ";
    line += next() % 100000;
    lines.push(line);
    size += line.length + 1;
  }
  return encoder.encode(lines.join("\n"));
}

function randomBlob(bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  for (let at = 0; at < bytes; at += 65536) crypto.getRandomValues(out.subarray(at, at + 65536));
  return out;
}

/** Streams a fast-import script into `git fast-import` with backpressure. */
async function fastImport(repo: string, mb: number): Promise<void> {
  const child = new Deno.Command("git", {
    args: ["fast-import", "--quiet"],
    cwd: repo,
    env: GIT_ENV,
    stdin: "piped",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  const data = async (bytes: Uint8Array) => {
    await w.write(encoder.encode(`data ${bytes.length}\n`));
    await w.write(bytes);
    await w.write(encoder.encode("\n"));
  };
  const next = xorshift(42);
  const notes = Array.from({ length: 20 }, (_, i) => text(30_000, xorshift(i + 1)));
  const randomTotal = mb * 0.6 * 2 ** 20;
  const textTotal = mb * 0.4 * 3.5 * 2 ** 20;
  let randomDone = 0;
  let textDone = 0;
  for (let c = 1; randomDone < randomTotal || textDone < textTotal; c++) {
    const who = `bench <bench@gitedge.invalid> ${1_700_000_000 + c} +0000`;
    await w.write(encoder.encode(`commit refs/heads/main\ncommitter ${who}\n`));
    await data(encoder.encode(`commit ${c}\n`));
    // History: small edits to a rotating set of text files (delta chains).
    for (let k = 0; k < 3; k++) {
      const f = (c * 3 + k) % notes.length;
      const edit = text(200, next);
      const at = next() % (notes[f].length - 200);
      notes[f] = new Uint8Array([
        ...notes[f].subarray(0, at),
        ...edit,
        ...notes[f].subarray(at + 100),
      ]);
      await w.write(encoder.encode(`M 100644 inline notes/${f}.txt\n`));
      await data(notes[f]);
    }
    if (textDone < textTotal) {
      await w.write(encoder.encode(`M 100644 inline text/${c}.txt\n`));
      const t = text(512 * 1024, next);
      textDone += t.length;
      await data(t);
    }
    if (randomDone < randomTotal) {
      await w.write(encoder.encode(`M 100644 inline bin/${c}.bin\n`));
      const size = 256 * 1024 + (next() % (1 << 20));
      randomDone += size;
      await data(randomBlob(size));
    }
    await w.write(encoder.encode("\n"));
  }
  await w.close();
  const status = await child.output();
  if (!status.success) throw new Error(`fast-import: ${new TextDecoder().decode(status.stderr)}`);
}

/** Returns the cached bench pack, building it on first use. */
async function benchPack(mb: number): Promise<string> {
  const dir = `${Deno.env.get("TMPDIR") ?? "/tmp"}/gitedge-bench`;
  const path = `${dir}/bench-${mb}mb.pack`;
  try {
    await Deno.stat(path);
    return path;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  await Deno.mkdir(dir, { recursive: true });
  const repo = await Deno.makeTempDir({ dir, prefix: "repo-" });
  const t = performance.now();
  console.log(`building a ~${mb} MB pack in ${repo} ...`);
  await run(["init", "-q", "-b", "main", repo]);
  await fastImport(repo, mb);
  const out = await Deno.open(`${path}.tmp`, { write: true, create: true, truncate: true });
  const child = new Deno.Command("git", {
    args: ["pack-objects", "--stdout", "--all", "--delta-base-offset", "--window=0", "-q"],
    cwd: repo,
    env: GIT_ENV,
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  await child.stdout.pipeTo(out.writable);
  if (!(await child.status).success) throw new Error("pack-objects failed");
  await Deno.rename(`${path}.tmp`, path);
  await Deno.remove(repo, { recursive: true });
  console.log(`built in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  return path;
}

/** Peak RSS sampler (this process, every 20 ms). */
function rssSampler(): { stop: () => number } {
  let peak = Deno.memoryUsage().rss;
  const timer = setInterval(() => {
    peak = Math.max(peak, Deno.memoryUsage().rss);
  }, 20);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, Deno.memoryUsage().rss);
    },
  };
}

const BUNDLE = GIT_BUNDLE;

/** The pack inside git's v2.0.0 bundle (everything after the header's blank line), cached. */
async function bundlePack(): Promise<string> {
  const dir = `${Deno.env.get("TMPDIR") ?? "/tmp"}/gitedge-bench`;
  const path = `${dir}/git-v2.0.0.pack`;
  if (await Deno.stat(path).then(() => true, () => false)) return path;
  await Deno.mkdir(dir, { recursive: true });
  const bytes = await Deno.readFile(BUNDLE);
  let at = 0;
  while (!(bytes[at] === 0x0a && bytes[at + 1] === 0x0a)) {
    if (++at >= bytes.length) throw new Error(`${BUNDLE}: no end of bundle header`);
  }
  const pack = bytes.subarray(at + 2);
  if (new TextDecoder().decode(pack.subarray(0, 4)) !== "PACK") {
    throw new Error(`${BUNDLE}: no pack after the header`);
  }
  await Deno.writeFile(`${path}.tmp`, pack);
  await Deno.rename(`${path}.tmp`, path);
  return path;
}

/**
 * The straightforward way to the same verdict as `scanPack`: every entry inflated and its size
 * checked, the trailer SHA-1 checked. Entry boundaries come from `index` (a scan's), for free.
 */
async function inflateEverything(path: string, index: PackEntryTable): Promise<void> {
  const bytes = await Deno.readFile(path);
  const digest = sha1(bytes.subarray(0, bytes.length - 20));
  const trailer = bytes.subarray(bytes.length - 20);
  if (!digest.every((b, i) => b === trailer[i])) throw new Error("trailer mismatch");
  for (let i = 0; i < index.length; i++) {
    const start = index.offset(i) + index.headerLength(i);
    const size = index.size(i);
    const out = unzlibSync(bytes.subarray(start, index.end(i)), { out: new Uint8Array(size) });
    if (out.length !== size) throw new Error(`entry ${i}: ${out.length} bytes, header ${size}`);
  }
}

function discardSink(): WritableStream<Uint8Array> {
  return new WritableStream<Uint8Array>({ write() {} });
}

async function benchOne(name: string, path: string, runs: number): Promise<void> {
  const size = (await Deno.stat(path)).size;
  const sizeMb = size / 2 ** 20;
  const work = await Deno.makeTempDir({ prefix: "gitedge-bench-run-" });
  try {
    const open = async () => (await Deno.open(path)).readable;
    const summary = await scanPack(await open());
    const deltas = summary.entries.filter((e) => e.type === 6 || e.type === 7).length;
    // verify-pack needs the .idx next to a copy of the pack; made once, untimed.
    await Deno.copyFile(path, `${work}/v.pack`);
    await run(["index-pack", "-o", `${work}/v.idx`, `${work}/v.pack`], work);

    const baseRss = Deno.memoryUsage().rss;
    let scanPeak = baseRss;
    const [scan, inflate, verifyPack, indexPack] = await interleaved(runs, [
      () =>
        timed(async () => {
          const rss = rssSampler();
          await scanPack(await open(), { keepEntries: false });
          scanPeak = Math.max(scanPeak, rss.stop());
        }),
      () => timed(() => inflateEverything(path, summary.index)),
      () => timed(() => run(["verify-pack", `${work}/v.idx`], work)),
      () => timed(() => run(["index-pack", "-o", `${work}/i.idx`, path], work)),
    ]);
    const plan = planSplit(summary.index, 8);
    const splitRss = rssSampler();
    const [split] = await interleaved(runs, [
      () =>
        timed(async () => {
          await splitPack(await open(), summary, plan, plan.parts.map(() => discardSink()));
        }),
    ]);
    const splitPeak = splitRss.stop();

    const s = median(scan);
    const row = (label: string, times: number[], vs: Cell): Cell[] => {
      const t = median(times);
      return [label, t.toFixed(2), (sizeMb / t).toFixed(1), vs];
    };
    const parts = plan.parts.map((p) => p.bytes / 2 ** 20);
    const m = (n: number) => `${(n / 2 ** 20).toFixed(0)} MB`;
    printResult({
      title: `${name}: ${sizeMb.toFixed(1)} MB, ${summary.objects} objects (${deltas} deltas); ` +
        `median of ${runs} interleaved runs; load ${loadavg()}`,
      headers: ["check", "median s", "MB/s", "time / scanPack"],
      rows: [
        row("scanPack (ours)", scan, "1.00x"),
        row("inflate baseline (same verdict)", inflate, ratio(median(inflate), s)),
        row("git verify-pack (also hashes: more work)", verifyPack, ratio(median(verifyPack), s)),
        row("git index-pack (reference: writes an idx)", indexPack, null),
        row("splitPack 8 parts (ours)", split, null),
      ],
      ratios: [
        `split parts MB: max ${Math.max(...parts).toFixed(1)} min ${Math.min(...parts).toFixed(1)}`,
        `rss: baseline ${m(baseRss)}, peak during scan ${m(scanPeak)}, during split ${
          m(splitPeak)
        } (entries kept: ${summary.entries.length})`,
      ],
    });
  } finally {
    await Deno.remove(work, { recursive: true });
  }
}

const mb = flags.number("mb", 200);
const runs = flags.number("runs", 3);
const which = flags.list("pack", ["synthetic", "git"]);
if (which.includes("synthetic")) {
  await benchOne("synthetic pack", await benchPack(mb), runs);
}
if (which.includes("git")) {
  await benchOne("git v2.0.0 pack (real deltas)", await bundlePack(), runs);
}
