/**
 * Whether the repository's git flushes packs to disk (`core.fsync`), so a spooled pack is made as
 * durable as `git index-pack --stdin` would make it: no less (git's default flushes packs), and no
 * more (a CI runner that set `core.fsync=none` pays for no flush, as with stock git).
 */
import { GitProcessError } from "./errors.ts";
import { runGit } from "./git_command.ts";

/** The `core.fsync` names git knows, and whether each includes packs (git's config table). */
const NAMES: readonly [string, boolean][] = [
  ["loose-object", false],
  ["pack", true],
  ["pack-metadata", false],
  ["commit-graph", false],
  ["index", false],
  ["objects", true],
  ["reference", false],
  ["derived-metadata", false],
  ["committed", true],
  ["added", true],
  ["all", true],
];

/**
 * Whether a `core.fsync` value (null when unset) makes git flush packs, read the way git reads it:
 * starting from git's default (which flushes packs), each comma-separated word names every
 * component whose name it begins (`p` is `pack` and `pack-metadata`), a word with `-` removes
 * them, any other adds them, and `none` as the whole rest of the value clears the default; the
 * result is the default less what was removed, plus what was added.
 */
export function fsyncsPacks(value: string | null): boolean {
  if (value === null) return true;
  let current = true;
  let added = false;
  let removed = false;
  let rest = value;
  while (true) {
    rest = rest.replace(/^[, \t\n\r]+/, "");
    if (rest === "none") {
      current = false;
      break;
    }
    const comma = rest.indexOf(",");
    let word = comma < 0 ? rest : rest.slice(0, comma);
    const negated = word.startsWith("-");
    if (negated) word = word.slice(1);
    if (word === "") break;
    for (const [name, packs] of NAMES) {
      if (!packs || !name.startsWith(word)) continue;
      if (negated) removed = true;
      else added = true;
    }
    if (comma < 0) break;
    rest = rest.slice(comma + 1);
  }
  return (current && !removed) || added;
}

/** Reads `core.fsync` as git would for `gitDir` (its own, global and system config). */
export async function readFsyncsPacks(gitDir: string): Promise<boolean> {
  try {
    const value = await runGit(["config", "--get", "core.fsync"], { gitDir });
    return fsyncsPacks(value.replace(/\n$/, ""));
  } catch (error) {
    // Exit 1: not set. Anything else (a broken config) leaves git's default.
    if (error instanceof GitProcessError) return true;
    throw error;
  }
}
