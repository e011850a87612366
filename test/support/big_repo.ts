/**
 * A repository of git.git's class for benches: hundreds of thousands of objects with real delta
 * chains (many small text files, each revised a few lines at a time) plus incompressible blobs up
 * to a target pack size. Generated once with `git fast-import` and kept in the fixture cache.
 */
import { cachedBare, cacheKey, copyCachedInto } from "./fixture_cache.ts";
import { commitCommand, type FileChange, runFastImport, tagCommand } from "./fast_import.ts";
import { signature, textLines } from "./fixture_stream.ts";
import { SeededRandom } from "./random.ts";
import type { Origin } from "./origin.ts";
import { refsOf } from "./repo_compare.ts";
import type { FixtureInfo } from "./fixtures.ts";

/** What the big repository contains. */
export interface BigRepoSpec {
  /** Commits on main; each adds a commit, two trees and `filesPerCommit` blobs. */
  commits: number;
  /** Text files revised per commit (all in one directory). */
  filesPerCommit: number;
  /** Directories of text files (`dirs × filesPerDir` files in all). */
  dirs: number;
  filesPerDir: number;
  /** Total bytes of random 1 MiB blobs spread over the history. */
  binaryBytes: number;
  /** An annotated tag every this many commits. */
  tagEvery: number;
  seed: number;
}

/**
 * 848,812 objects in a 682 MB pack (git.git: 849k objects, 318 MB). fast-import deltas each blob
 * against the one written before it, so trees carry the long delta chains and text blobs fewer.
 */
export const GIT_SIZED: BigRepoSpec = {
  commits: 106_000,
  filesPerCommit: 5,
  dirs: 64,
  filesPerDir: 40,
  binaryBytes: 300 << 20,
  tagEvery: 500,
  seed: 849,
};

const BLOB_BYTES = 1 << 20;

/** Fast-import commands for `spec`, gathered into ~1 MiB writes. */
export function* bigRepoStream(spec: BigRepoSpec): Generator<Uint8Array> {
  let buffer = new Uint8Array(2 << 20);
  let filled = 0;
  for (const piece of bigRepoCommands(spec)) {
    if (filled + piece.length > buffer.length) {
      yield buffer.slice(0, filled);
      filled = 0;
      if (piece.length > buffer.length) buffer = new Uint8Array(piece.length);
    }
    buffer.set(piece, filled);
    filled += piece.length;
  }
  if (filled > 0) yield buffer.slice(0, filled);
}

function* bigRepoCommands(spec: BigRepoSpec): Generator<Uint8Array> {
  const rng = new SeededRandom(spec.seed);
  const binary = new SeededRandom(spec.seed ^ 0x5eed5eed);
  const files = spec.dirs * spec.filesPerDir;
  // Each file: 30 lines, of which one or two change per revision (a short delta on the last).
  const contents: string[][] = Array.from(
    { length: files },
    () => textLines(rng, 30).split("\n").slice(0, 30),
  );
  const blobs = Math.ceil(spec.binaryBytes / BLOB_BYTES);
  const blobEvery = Math.max(1, Math.floor(spec.commits / Math.max(1, blobs)));
  let blobsWritten = 0;
  for (let i = 0; i < spec.commits; i++) {
    const dir = i % spec.dirs;
    const changes: FileChange[] = [];
    for (let f = 0; f < spec.filesPerCommit; f++) {
      const n = (Math.floor(i / spec.dirs) * spec.filesPerCommit + f) % spec.filesPerDir;
      const lines = contents[dir * spec.filesPerDir + n];
      lines[rng.int(lines.length)] = `r${i} ${rng.words(7)}`;
      if (rng.int(2) === 0) lines[rng.int(lines.length)] = rng.words(8);
      changes.push({ path: `d${dir}/f${n}.txt`, data: `${lines.join("\n")}\n` });
    }
    if (blobsWritten < blobs && i % blobEvery === 0) {
      const size = Math.min(BLOB_BYTES, spec.binaryBytes - blobsWritten * BLOB_BYTES);
      changes.push({ path: `bin/blob-${blobsWritten}.bin`, data: () => binary.bytes(size) });
      blobsWritten++;
    }
    yield* commitCommand({
      ref: "refs/heads/main",
      mark: i + 1,
      from: i === 0 ? undefined : `:${i}`,
      author: signature(1_600_000_000 + i * 60),
      message: `commit ${i}\n`,
      files: changes,
    });
    if ((i + 1) % spec.tagEvery === 0) {
      yield* tagCommand(`v${(i + 1) / spec.tagEvery}`, `:${i + 1}`, signature(i), `r ${i}\n`);
    }
  }
}

/**
 * Creates bare repository `name` at `origin` with `spec`'s content, from the fixture cache
 * (generating it the first time takes minutes of CPU).
 */
export async function makeBigRepo(
  origin: Origin,
  name: string,
  spec: BigRepoSpec = GIT_SIZED,
): Promise<FixtureInfo> {
  const bare = await origin.createBare(name);
  await copyBigRepoInto(bare, spec);
  return { name, bare, url: origin.repoUrl(name), refs: await refsOf(bare) };
}

/**
 * Fills the empty bare repository `bare` (default branch `main`) with `spec`'s content from the
 * fixture cache, for benches that run their own origin.
 */
export async function copyBigRepoInto(bare: string, spec: BigRepoSpec = GIT_SIZED): Promise<void> {
  const cached = await cachedBare(
    cacheKey({ kind: "big-repo", spec, compression: 1 }),
    // Level 1 keeps the text (most objects) small, as a served repository's pack would be.
    (dir) => runFastImport(dir, bigRepoStream(spec), { compression: 1 }),
  );
  await copyCachedInto(cached, bare);
}
