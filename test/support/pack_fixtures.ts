/** Standalone pack files of random blobs, for benchmarking pack downloads. */
import { blobCommand, readMarks, runFastImport } from "./fast_import.ts";
import { cachedEntry, cacheKey } from "./fixture_cache.ts";
import { git, GitCommandError, spawnGit, tempDir } from "./git.ts";
import { SeededRandom } from "./random.ts";

/** A pack written by {@link makePackFixtures}. */
export interface PackFixture {
  /** The pack's trailing SHA-1 checksum (hex); the file is `pack-<hash>.pack`. */
  hash: string;
  path: string;
  size: number;
}

/** Options for {@link makePackFixtures}. */
export interface PackFixtureOptions {
  count: number;
  /** Approximate size of each pack; content is incompressible so sizes land within ~0.1%. */
  bytesEach: number;
  seed?: number;
}

/** A generated pack file is not what it should be. */
export class PackFixtureError extends Error {
  override name = "PackFixtureError";
}

const BLOB_SIZE = 256 * 1024;

/** Packs totalling at least this many bytes are cached on disk and copied in. */
const CACHE_THRESHOLD = 16 * 1024 * 1024;

/**
 * Writes `count` independent, self-contained packs of random blobs into `dir` (no two share an
 * object) and returns them in creation order. Same options, same packs; big sets are cached.
 */
export async function makePackFixtures(
  dir: string,
  opts: PackFixtureOptions,
): Promise<PackFixture[]> {
  if (!Number.isInteger(opts.count) || opts.count < 1 || opts.bytesEach < 1) {
    throw new RangeError(`makePackFixtures needs count >= 1 and bytesEach >= 1`);
  }
  await Deno.mkdir(dir, { recursive: true });
  if (opts.count * opts.bytesEach < CACHE_THRESHOLD) return await generatePacks(dir, opts);
  const key = cacheKey({
    kind: "packs",
    count: opts.count,
    bytesEach: opts.bytesEach,
    seed: opts.seed ?? 1,
  });
  const entry = await cachedEntry(key, async (tmp) => {
    const packs = await generatePacks(tmp, opts);
    await Deno.writeTextFile(`${tmp}/packs.json`, JSON.stringify(packs.map((p) => p.hash)));
  });
  const hashes: string[] = JSON.parse(await Deno.readTextFile(`${entry}/packs.json`));
  const packs: PackFixture[] = [];
  for (const hash of hashes) {
    const path = `${dir}/pack-${hash}.pack`;
    await Deno.copyFile(`${entry}/pack-${hash}.pack`, path);
    packs.push({ hash, path, size: (await Deno.stat(path)).size });
  }
  return packs;
}

async function generatePacks(dir: string, opts: PackFixtureOptions): Promise<PackFixture[]> {
  await using scratch = await tempDir("gitedge-packs-");
  await git(["init", "--quiet", "--bare", scratch.path]);
  const rng = new SeededRandom(opts.seed ?? 1);
  const perPack: number[][] = [];
  let mark = 0;
  function* blobs(): Generator<Uint8Array> {
    for (let p = 0; p < opts.count; p++) {
      const marks: number[] = [];
      for (let left = opts.bytesEach; left > 0; left -= BLOB_SIZE) {
        marks.push(++mark);
        yield* blobCommand(mark, rng.bytes(Math.min(BLOB_SIZE, left)));
      }
      perPack.push(marks);
    }
  }
  const marksFile = `${scratch.path}/marks`;
  await runFastImport(scratch.path, blobs(), { exportMarks: marksFile });
  const oids = await readMarks(marksFile);

  const packs: PackFixture[] = [];
  for (const [p, marks] of perPack.entries()) {
    const ids = marks.map((m) => oids.get(m)!);
    packs.push(await writePack(scratch.path, ids, `${dir}/.pack-${p}.tmp`, dir));
  }
  return packs;
}
/** Streams `git pack-objects --stdout` of `ids` to `tmp`, then renames it by its checksum. */
async function writePack(repo: string, ids: string[], tmp: string, dir: string) {
  const child = spawnGit(["pack-objects", "--stdout", "-q", "--window=0"], {
    cwd: repo,
    stdin: "piped",
    stdout: "piped",
  });
  const stderr = new Response(child.stderr).text();
  const file = await Deno.open(tmp, { write: true, create: true, truncate: true });
  const input = new Blob([ids.join("\n") + "\n"]).stream().pipeTo(child.stdin);
  const [fed, written, status] = await Promise.allSettled([
    input,
    child.stdout.pipeTo(file.writable),
    child.status,
  ]);
  if (status.status === "rejected") throw status.reason;
  if (!status.value.success) {
    throw new GitCommandError(["pack-objects", "--stdout"], status.value.code, await stderr);
  }
  for (const step of [fed, written]) if (step.status === "rejected") throw step.reason;
  const hash = await trailingChecksum(tmp);
  const path = `${dir}/pack-${hash}.pack`;
  await Deno.rename(tmp, path);
  return { hash, path, size: (await Deno.stat(path)).size };
}

async function trailingChecksum(path: string): Promise<string> {
  using f = await Deno.open(path);
  await f.seek(-20, Deno.SeekMode.End);
  const buf = new Uint8Array(20);
  let got = 0;
  while (got < 20) {
    const n = await f.read(buf.subarray(got));
    if (n === null) throw new PackFixtureError(`${path} is too short for a pack trailer`);
    got += n;
  }
  return Array.from(buf, (b) => b.toString(16).padStart(2, "0")).join("");
}
