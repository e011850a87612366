/**
 * The clone's connectivity check: every wanted object and everything it reaches must be present.
 *
 * One `git rev-list --objects` walk runs on one core and re-reads every commit and tree of the
 * history, after the packs are indexed, while the other cores idle. On a big clone the walk is
 * split into parts that run at once, cut at commits the refs point to: with cut points
 * M1 … Mk (newest first), the parts walk `wants ^M1`, `M1 ^M2`, …, `Mk`. Each part checks what
 * its first line reaches minus what the next cut reaches, and the next part checks that, so
 * together they check everything the wants reach whatever the cut points are (a cut point only
 * decides how the work is shared). The cut points are the refs' commits at quantiles of their
 * commit dates; when they cannot be read the check is one walk (which then reports what is
 * missing).
 */
import { ConnectivityError, GitProcessError } from "./errors.ts";
import { runGit } from "./git_command.ts";
import { settleAll } from "./pool.ts";

/** Options for {@link checkConnectivity}. */
export interface ConnectivityOptions {
  /** Bytes of pack the clone received: below {@link SPLIT_MIN_BYTES} the check is one walk. */
  packBytes?: number;
  /**
   * Walks at once, at most {@link MAX_WALKS}; 1 is one walk, as git does. Default:
   * `GITEDGE_CONNECTIVITY_WALKS` if set, else one per CPU unless the machine is busy (1-minute
   * load average at least twice the CPUs: with no idle core a second walk only adds its own
   * CPU).
   */
  walks?: number;
  /** Stops the walks (their git processes are killed). */
  signal?: AbortSignal;
  /** A partial clone: objects its promisor packs lack are not missing (git's own check). */
  promisor?: boolean;
}

/** Smaller clones check in one walk: the cut points' lookup would cost more than it saves. */
export const SPLIT_MIN_BYTES = 16 << 20;
/** At most this many walks at once. */
export const MAX_WALKS = 4;
/** Refs sampled when choosing cut points (their commits' dates are read in one git call). */
const MAX_SAMPLED_REFS = 1024;

/**
 * Checks that `wants` and everything they reach are in `gitDir`. Resolves with the number of
 * walks it ran; rejects with {@link ConnectivityError} naming what git found missing.
 */
export async function checkConnectivity(
  gitDir: string,
  wants: string[],
  options: ConnectivityOptions = {},
): Promise<number> {
  const walks = Math.max(1, Math.min(MAX_WALKS, options.walks ?? defaultWalks()));
  const big = (options.packBytes ?? Infinity) >= SPLIT_MIN_BYTES;
  const cuts = walks > 1 && big ? await cutPoints(gitDir, wants, walks - 1) : [];
  const plan = planWalks(wants, cuts);
  const flags = options.promisor ? ["--exclude-promisor-objects"] : [];
  await settleAll(plan.map((lines) => walk(gitDir, lines, flags, options.signal)));
  return plan.length;
}

function defaultWalks(): number {
  const setting = Deno.env.get("GITEDGE_CONNECTIVITY_WALKS");
  if (setting === undefined || setting === "") {
    const cpus = navigator.hardwareConcurrency;
    return Deno.loadavg()[0] >= 2 * cpus ? 1 : cpus;
  }
  const walks = Number(setting);
  if (!Number.isInteger(walks) || walks < 1) {
    throw new RangeError(`GITEDGE_CONNECTIVITY_WALKS must be a positive integer, got ${setting}`);
  }
  return walks;
}

/**
 * The `rev-list --stdin` input of each walk for cut points `cuts` (newest first): `wants ^M1`,
 * `M1 ^M2`, …, `Mk`. Without cut points, one walk of `wants`.
 */
export function planWalks(wants: string[], cuts: string[]): string[][] {
  const starts = [wants, ...cuts.map((cut) => [cut])];
  return starts.map((start, i) => i < cuts.length ? [...start, `^${cuts[i]}`] : start);
}

async function walk(
  gitDir: string,
  lines: string[],
  flags: string[],
  signal?: AbortSignal,
): Promise<void> {
  try {
    await runGit(["rev-list", "--objects", "--quiet", ...flags, "--stdin"], {
      gitDir,
      stdin: lines.join("\n") + "\n",
      signal,
    });
  } catch (error) {
    if (error instanceof GitProcessError) throw new ConnectivityError(error.stderr);
    throw error;
  }
}

/**
 * Up to `count` distinct commits among those the wants point to, at quantiles of their commit
 * dates (newest first); none when fewer than two distinct commits or the dates cannot be read.
 */
export async function cutPoints(gitDir: string, wants: string[], count: number): Promise<string[]> {
  const distinct = [...new Set(wants)];
  if (distinct.length < 2) return [];
  const step = Math.max(1, distinct.length / MAX_SAMPLED_REFS);
  const sample: string[] = [];
  for (let i = 0; i < distinct.length && sample.length < MAX_SAMPLED_REFS; i += step) {
    sample.push(distinct[Math.floor(i)]);
  }
  let out: string;
  try {
    // Tags are peeled to their commits; anything else fails the lookup (one walk then).
    out = await runGit(["log", "--no-walk=unsorted", "--stdin", "--format=%H %ct"], {
      gitDir,
      stdin: sample.join("\n") + "\n",
    });
  } catch (error) {
    if (error instanceof GitProcessError) return [];
    throw error;
  }
  const dated = new Map<string, number>();
  for (const line of out.split("\n")) {
    const [oid, time] = line.split(" ");
    if (oid && time) dated.set(oid, Number(time));
  }
  const commits = [...dated].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  if (commits.length < 2) return [];
  const cuts: string[] = [];
  for (let i = 1; i <= count; i++) {
    const at = Math.floor(i * commits.length / (count + 1));
    const oid = commits[Math.min(Math.max(at, 1), commits.length - 1)][0];
    if (!cuts.includes(oid)) cuts.push(oid);
  }
  return cuts;
}
