/**
 * Fixture repositories made by real git (fast-import) inside an {@link Origin}, plus helpers the
 * end-to-end tests use to compare clones and to move the origin forward.
 */
import { commitCommand, runFastImport, tagCommand } from "./fast_import.ts";
import { cachedBare, cacheKey, copyCachedInto } from "./fixture_cache.ts";
import {
  type FixtureSpec,
  fixtureStream,
  randomBytesTotal,
  resolveSpec,
  signature,
  textLines,
} from "./fixture_stream.ts";
import { git } from "./git.ts";
import type { Origin } from "./origin.ts";
import { SeededRandom } from "./random.ts";
import { refsOf } from "./repo_compare.ts";

export type { FixtureSpec } from "./fixture_stream.ts";
export {
  assertSameClone,
  assertSameObjects,
  CloneMismatchError,
  objectIdsOf,
  refsOf,
} from "./repo_compare.ts";
export {
  makePackFixtures,
  type PackFixture,
  PackFixtureError,
  type PackFixtureOptions,
} from "./pack_fixtures.ts";

/** A fixture repository served by an origin. */
export interface FixtureInfo {
  /** Repository name at the origin (path under its root). */
  name: string;
  /** Path of the bare repository on disk. */
  bare: string;
  /** Clone URL at the origin. */
  url: string;
  /** Refs after creation (see {@link refsOf}). */
  refs: Record<string, string>;
}

/** Fixtures with at least this many random bytes are cached on disk and copied in. */
const CACHE_THRESHOLD = 16 * 1024 * 1024;

/**
 * Creates bare repository `name` at `origin` filled per `spec` (deterministic for a seed): main
 * with `commits` commits, feature branches (merged back if `merges`), annotated tags, random
 * blobs and a many-revision text file. Big fixtures come from the on-disk cache.
 */
export async function makeRepo(
  origin: Origin,
  name: string,
  spec: FixtureSpec = {},
  opts: { objectFormat?: "sha1" | "sha256" } = {},
): Promise<FixtureInfo> {
  const resolved = resolveSpec(spec);
  const bare = await origin.createBare(name, opts);
  const sha1 = (opts.objectFormat ?? "sha1") === "sha1";
  if (sha1 && randomBytesTotal(resolved) >= CACHE_THRESHOLD) {
    const cached = await cachedBare(
      cacheKey({ kind: "repo", spec: resolved }),
      (dir) => runFastImport(dir, fixtureStream(resolved)),
    );
    await copyCachedInto(cached, bare);
  } else {
    await runFastImport(bare, fixtureStream(resolved));
  }
  return { name, bare, url: origin.repoUrl(name), refs: await refsOf(bare) };
}

/** Options for {@link addCommits}. */
export interface AddCommitsOptions {
  /** How many commits to add (at least 1). */
  commits: number;
  /** Branch to extend (default `main`). */
  branch?: string;
  /** Also create this annotated tag on the new tip. */
  tag?: string;
}

/** What {@link addCommits} changed. */
export interface AddedCommits {
  /** Object id of the new branch tip. */
  tip: string;
  /** All refs afterwards. */
  refs: Record<string, string>;
}

/**
 * Moves the origin's repository `name` forward: `commits` new commits on `branch` (each adding a
 * small text file, one minute after the previous tip) and optionally an annotated tag.
 */
export async function addCommits(
  origin: Origin,
  name: string,
  opts: AddCommitsOptions,
): Promise<AddedCommits> {
  if (!Number.isInteger(opts.commits) || opts.commits < 1) {
    throw new RangeError(`addCommits needs commits >= 1, got ${opts.commits}`);
  }
  const bare = `${origin.root}/${name}`;
  const ref = `refs/heads/${opts.branch ?? "main"}`;
  const parent = (await git(["rev-parse", "--verify", `${ref}^{commit}`], { cwd: bare })).trim();
  const parentTime = Number(
    (await git(["log", "-1", "--format=%ct", parent], { cwd: bare })).trim(),
  );
  const rng = new SeededRandom(parentTime);
  function* commands(): Generator<Uint8Array> {
    for (let i = 1; i <= opts.commits; i++) {
      const time = parentTime + i * 60;
      yield* commitCommand({
        ref,
        mark: i,
        from: i === 1 ? parent : `:${i - 1}`,
        author: signature(time),
        message: `update at ${time}\n`,
        files: [{ path: `updates/update-${time}.txt`, data: textLines(rng, 10) }],
      });
    }
    if (opts.tag) {
      const time = parentTime + opts.commits * 60 + 1;
      yield* tagCommand(opts.tag, `:${opts.commits}`, signature(time), `${opts.tag}\n`);
    }
  }
  await runFastImport(bare, commands());
  const tip = (await git(["rev-parse", ref], { cwd: bare })).trim();
  return { tip, refs: await refsOf(bare) };
}
