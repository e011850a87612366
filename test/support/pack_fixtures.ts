/**
 * Pack fixtures made by real git: a fast-import repository whose `git pack-objects` packs (deep
 * delta chains, incompressible, empty and ~2 MB blobs, annotated tags) come with the ground truth
 * `git verify-pack -v` reports, for the pack reader, writer, index and splitter tests; and
 * standalone packs of random blobs (cached when big), for packfile-URI downloads and benches.
 */
import { isObjectId } from "../../src/git/object_id.ts";
import { blobCommand, readMarks, runFastImport } from "./fast_import.ts";
import { cachedEntry, cacheKey } from "./fixture_cache.ts";
import { git, gitBytes, GitCommandError, spawnGit, tempDir } from "./git.ts";
import { SeededRandom } from "./random.ts";
import { concatBytes } from "./streams.ts";

const encoder = new TextEncoder();

/** One object line of `git verify-pack -v`. */
export interface VerifiedObject {
  id: string;
  type: string;
  size: number;
  sizeInPack: number;
  offset: number;
  depth?: number;
  baseId?: string;
}

/** Readable pseudo-text of roughly `length` bytes. */
export function randomText(length: number, seed: number): string {
  const rand = new SeededRandom(seed);
  const words = ["pack", "delta", "object", "tree", "commit", "blob", "zlib", "offset", "edge"];
  const lines: string[] = [];
  let size = 0;
  while (size < length) {
    const n = 3 + rand.int(9);
    const line = Array.from({ length: n }, () => words[rand.int(words.length)])
      .join(" ") + ` ${rand.int(100000)}`;
    lines.push(line);
    size += line.length + 1;
  }
  return lines.join("\n") + "\n";
}

function data(bytes: Uint8Array | string): Uint8Array {
  const body = typeof bytes === "string" ? encoder.encode(bytes) : bytes;
  return concatBytes([encoder.encode(`data ${body.length}\n`), body, encoder.encode("\n")]);
}

/** Options for {@link buildRepo}. */
export interface RepoOptions {
  /** Commits editing the same text file (default 120). */
  commits?: number;
  /** Add the ~2 MB blobs (default true). */
  big?: boolean;
  /** `sha256` for a SHA-256 repository (default `sha1`). */
  objectFormat?: "sha1" | "sha256";
}

/**
 * Creates a repository in `dir` via fast-import. Tag `small` points at commit 20, before any
 * big blob, for a small pack.
 */
export async function buildRepo(dir: string, options: RepoOptions = {}): Promise<void> {
  const commits = options.commits ?? 120;
  await git(["init", "-q", "-b", "main", `--object-format=${options.objectFormat ?? "sha1"}`, dir]);
  const pieces: Uint8Array[] = [];
  const lines = randomText(8000, 1).split("\n");
  let time = 1_700_000_000;
  for (let c = 1; c <= commits; c++) {
    // Small edits keep successive versions delta-friendly.
    lines[(c * 37) % lines.length] = `edit ${c} ${randomText(40, c + 100).trim()}`;
    if (c % 10 === 0) lines.push(`appended at ${c}`);
    const files: Uint8Array[] = [
      encoder.encode("M 100644 inline notes.txt\n"),
      data(lines.join("\n")),
    ];
    if (c % 12 === 3) {
      files.push(encoder.encode(`M 100644 inline bin/r${c}.bin\n`));
      files.push(data(new SeededRandom(c).bytes(1000 + c * 200)));
    }
    if (c === 5) files.push(encoder.encode("M 100644 inline empty\n"), data(new Uint8Array(0)));
    if (c === commits - 5 && options.big !== false) {
      files.push(
        encoder.encode("M 100644 inline big-random.bin\n"),
        data(new SeededRandom(7).bytes(2 << 20)),
      );
      files.push(encoder.encode("M 100644 inline big-text.txt\n"), data(randomText(2 << 20, 8)));
    }
    const who = `Pack Test <pack@gitedge.invalid> ${time++} +0000`;
    pieces.push(
      encoder.encode(`commit refs/heads/main\nmark :${c}\nauthor ${who}\ncommitter ${who}\n`),
    );
    pieces.push(data(`commit ${c}\n`));
    if (c > 1) pieces.push(encoder.encode(`from :${c - 1}\n`));
    pieces.push(...files, encoder.encode("\n"));
    if (c === 20 || c % 50 === 0) {
      const name = c === 20 ? "small" : `v${c}`;
      pieces.push(encoder.encode(`tag ${name}\nfrom :${c}\ntagger ${who}\n`));
      pieces.push(data(`release ${name}\n`));
    }
  }
  await git(["fast-import", "--quiet"], { cwd: dir, stdin: concatBytes(pieces) });
}

/** Options for {@link packObjects}. */
export interface PackOptions {
  /** Use OFS_DELTA (default true); false gives REF_DELTA entries. */
  ofsDelta?: boolean;
  /** zlib level (`pack.compression`), default 6. */
  compression?: number;
  /** Revisions to pack (default: all refs). */
  revs?: string[];
}

/** Runs `git pack-objects --stdout` with fresh deltas and compression. */
export async function packObjects(dir: string, options: PackOptions = {}): Promise<Uint8Array> {
  const args = [
    "-c",
    `pack.compression=${options.compression ?? 6}`,
    "pack-objects",
    "--stdout",
    "--revs",
    "--no-reuse-object",
    "--window=50",
    "--depth=50",
    "-q",
  ];
  if (options.ofsDelta ?? true) args.push("--delta-base-offset");
  if (!options.revs) args.push("--all");
  const stdin = encoder.encode((options.revs ?? []).join("\n") + "\n");
  return await gitBytes(args, { cwd: dir, stdin });
}

/**
 * Indexes `pack` (written to `dir/name.pack`) with `git index-pack` and returns the
 * `git verify-pack -v` object lines. Throws if git rejects the pack.
 */
export async function verifyPack(
  dir: string,
  name: string,
  pack: Uint8Array,
): Promise<VerifiedObject[]> {
  const path = `${dir}/${name}.pack`;
  await Deno.writeFile(path, pack);
  await git(["index-pack", path], { cwd: dir });
  const out = await git(["verify-pack", "-v", path.replace(/\.pack$/, ".idx")], { cwd: dir });
  const objects: VerifiedObject[] = [];
  for (const line of out.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (!isObjectId(f[0])) continue;
    objects.push({
      id: f[0],
      type: f[1],
      size: Number(f[2]),
      sizeInPack: Number(f[3]),
      offset: Number(f[4]),
      depth: f[5] === undefined ? undefined : Number(f[5]),
      baseId: f[6],
    });
  }
  return objects.sort((a, b) => a.offset - b.offset);
}

/**
 * Writes `count` distinct tiny blobs with fast-import into a new repository at `dir` and
 * returns the path of the pack fast-import wrote (no pack-objects pass: quick at 200k).
 */
export async function tinyBlobPack(dir: string, count: number): Promise<string> {
  await git(["init", "-q", dir]);
  const parts: string[] = [];
  for (let i = 0; i < count; i++) {
    const body = `blob ${i}\n`;
    parts.push(`blob\ndata ${body.length}\n${body}\n`);
  }
  await git(["fast-import", "--quiet"], { cwd: dir, stdin: encoder.encode(parts.join("")) });
  const packDir = `${dir}/.git/objects/pack`;
  for await (const file of Deno.readDir(packDir)) {
    if (file.name.endsWith(".pack")) return `${packDir}/${file.name}`;
  }
  throw new Error(`fast-import wrote no pack in ${packDir}`);
}

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
