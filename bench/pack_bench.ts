/**
 * Pack pipeline benchmark: our streaming scanPack and 8-way splitPack against
 * `git index-pack` and `git verify-pack` on the same pack (median of 3 runs each), plus our
 * peak RSS.
 *
 * Usage: deno run --allow-all bench/pack_bench.ts [--mb 200] [--runs 3]
 *
 * The pack (compressible text with history, fresh text files and incompressible blobs) is built
 * once with fast-import and cached under $TMPDIR/gitedge-bench/.
 */

import { scanPack } from "../src/git/pack_reader.ts";
import { planSplit, splitPack } from "../src/git/pack_split.ts";

const GIT_ENV = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "bench",
  GIT_AUTHOR_EMAIL: "bench@gitedge.invalid",
  GIT_COMMITTER_NAME: "bench",
  GIT_COMMITTER_EMAIL: "bench@gitedge.invalid",
};

const encoder = new TextEncoder();

function option(name: string, fallback: number): number {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Number(Deno.args[at + 1]) : fallback;
}

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

/** Peak RSS sampler. */
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

async function median(runs: number, f: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await f();
    times.push((performance.now() - t) / 1000);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

function discardSink(): WritableStream<Uint8Array> {
  return new WritableStream<Uint8Array>({ write() {} });
}

const mb = option("mb", 200);
const runs = option("runs", 3);
const path = await benchPack(mb);
const size = (await Deno.stat(path)).size;
const sizeMb = size / 2 ** 20;
const work = await Deno.makeTempDir({ prefix: "gitedge-bench-run-" });
try {
  const open = async () => (await Deno.open(path)).readable;
  const baseRss = Deno.memoryUsage().rss;
  const scanRss = rssSampler();
  let objects = 0;
  const scan = await median(runs, async () => {
    objects = (await scanPack(await open(), { keepEntries: false })).objects;
  });
  const scanPeak = scanRss.stop();

  const summary = await scanPack(await open());
  const plan = planSplit(summary.index, 8);
  const splitRss = rssSampler();
  const split = await median(runs, async () => {
    await splitPack(await open(), summary, plan, plan.parts.map(() => discardSink()));
  });
  const splitPeak = splitRss.stop();

  const indexPack = await median(
    runs,
    () => run(["index-pack", "-o", `${work}/b.idx`, path], work),
  );
  await Deno.copyFile(path, `${work}/b.pack`);
  const verifyPack = await median(runs, () => run(["verify-pack", `${work}/b.idx`], work));

  const mbps = (s: number) => `${(sizeMb / s).toFixed(1)} MB/s`;
  const row = (name: string, s: number) =>
    console.log(
      `${name.padEnd(26)} ${s.toFixed(2).padStart(7)} s  ${mbps(s).padStart(12)}  x${
        (s / scan).toFixed(2)
      }`,
    );
  console.log(
    `pack: ${sizeMb.toFixed(1)} MB, ${objects} objects; median of ${runs} runs; ratio vs scanPack`,
  );
  row("scanPack (ours)", scan);
  row("splitPack 8 parts (ours)", split);
  row("git index-pack", indexPack);
  row("git verify-pack", verifyPack);
  const parts = plan.parts.map((p) => p.bytes / 2 ** 20);
  console.log(
    `split parts MB: max ${Math.max(...parts).toFixed(1)} min ${Math.min(...parts).toFixed(1)}`,
  );
  const m = (n: number) => `${(n / 2 ** 20).toFixed(0)} MB`;
  console.log(
    `rss: baseline ${m(baseRss)}, peak during scan ${m(scanPeak)}, during split ${
      m(splitPeak)
    } (entries kept: ${summary.entries.length})`,
  );
} finally {
  await Deno.remove(work, { recursive: true });
}
