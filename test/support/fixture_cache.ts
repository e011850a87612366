/**
 * On-disk cache of generated bare repositories, so benches reuse big fixtures across runs.
 * Entries live in `${GITEDGE_FIXTURE_CACHE ?? os tmpdir}/gitedge-fixtures/<key>.git`.
 */
import { tmpdir } from "node:os";
import { sha256 } from "@noble/hashes/sha2.js";
import { git } from "./git.ts";

/** Bump when generated content changes, so stale entries are not reused. */
const GENERATOR_VERSION = 1;

/** The directory holding cached fixtures. */
export function fixtureCacheDir(): string {
  return `${Deno.env.get("GITEDGE_FIXTURE_CACHE") ?? tmpdir()}/gitedge-fixtures`;
}

/** A stable key for any JSON-serialisable description of generated content. */
export function cacheKey(description: unknown): string {
  const text = JSON.stringify({ v: GENERATOR_VERSION, description });
  const digest = sha256(new TextEncoder().encode(text));
  return Array.from(digest.subarray(0, 12), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Returns the cache entry directory for `key`, filling it with `build(emptyDir)` first if missing.
 * Builds go to a private temp dir renamed into place, so readers never see partial entries and
 * concurrent builders do not clash (the first rename wins). `dir` defaults to
 * {@link fixtureCacheDir}.
 */
export async function cachedEntry(
  key: string,
  build: (dir: string) => Promise<void>,
  dir: string = fixtureCacheDir(),
): Promise<string> {
  const entry = `${dir}/${key}`;
  if (await exists(entry)) return entry;
  await Deno.mkdir(dir, { recursive: true });
  const tmp = await Deno.makeTempDir({ dir, prefix: `${key}.building-` });
  try {
    await build(tmp);
    await Deno.rename(tmp, entry).catch(async (e) => {
      if (!(await exists(entry))) throw e; // someone else finished first: theirs is as good
    });
  } finally {
    await Deno.remove(tmp, { recursive: true }).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }
  return entry;
}

/** A cached bare repository (refs packed) built by `fill(bareDir)`. */
export function cachedBare(key: string, fill: (bare: string) => Promise<void>): Promise<string> {
  return cachedEntry(`${key}.git`, async (dir) => {
    await git(["init", "--quiet", "--bare", "--initial-branch=main", dir]);
    await fill(dir);
    await git(["pack-refs", "--all"], { cwd: dir });
  });
}

/** Copies the packs and packed refs of cached bare `from` into the (empty) bare repo `to`. */
export async function copyCachedInto(from: string, to: string): Promise<void> {
  for await (const f of Deno.readDir(`${from}/objects/pack`)) {
    if (f.isFile) {
      await Deno.copyFile(`${from}/objects/pack/${f.name}`, `${to}/objects/pack/${f.name}`);
    }
  }
  await Deno.copyFile(`${from}/packed-refs`, `${to}/packed-refs`);
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
