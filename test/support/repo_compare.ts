/** Reading refs of a repository and asserting two clones are the same. */
import { git, GitCommandError } from "./git.ts";

/** Two clones differ; `differences` lists each difference found. */
export class CloneMismatchError extends Error {
  override name = "CloneMismatchError";
  constructor(readonly a: string, readonly b: string, readonly differences: string[]) {
    super(`clones differ:\n  a: ${a}\n  b: ${b}\n  ${differences.join("\n  ")}`);
  }
}

/** Every ref (`git for-each-ref`, incl. remote-tracking and tags) plus `HEAD` when it resolves. */
export async function refsOf(repoDir: string): Promise<Record<string, string>> {
  const refs: Record<string, string> = {};
  const out = await git(["for-each-ref", "--format=%(objectname) %(refname)"], { cwd: repoDir });
  for (const line of out.split("\n")) {
    if (line === "") continue;
    const space = line.indexOf(" ");
    refs[line.slice(space + 1)] = line.slice(0, space);
  }
  const head = await resolveHead(repoDir);
  if (head !== undefined) refs.HEAD = head;
  return refs;
}

/** Every object id in a repository's object store (packed and loose), sorted. */
export async function objectIdsOf(repoDir: string): Promise<string[]> {
  const out = await git(
    ["cat-file", "--batch-all-objects", "--batch-check=%(objectname)"],
    { cwd: repoDir },
  );
  return out.split("\n").filter((l) => l !== "").sort();
}

/** Asserts two repositories hold the same set of objects; names a few that differ. */
export async function assertSameObjects(a: string, b: string): Promise<void> {
  const [objsA, objsB] = await Promise.all([objectIdsOf(a), objectIdsOf(b)]);
  const setA = new Set(objsA);
  const setB = new Set(objsB);
  const onlyA = objsA.filter((o) => !setB.has(o));
  const onlyB = objsB.filter((o) => !setA.has(o));
  if (onlyA.length || onlyB.length) {
    throw new CloneMismatchError(a, b, [
      `objects: ${objsA.length} != ${objsB.length}`,
      `only in a (${onlyA.length}): ${onlyA.slice(0, 5).join(" ")}`,
      `only in b (${onlyB.length}): ${onlyB.slice(0, 5).join(" ")}`,
    ]);
  }
}

/** HEAD's object id, or undefined on an unborn branch. */
async function resolveHead(repoDir: string): Promise<string | undefined> {
  try {
    return (await git(["rev-parse", "--verify", "--quiet", "HEAD"], { cwd: repoDir })).trim();
  } catch (e) {
    // --verify --quiet exits 1 with no output exactly when HEAD does not resolve.
    if (e instanceof GitCommandError && e.code === 1 && e.stderr === "") return undefined;
    throw e;
  }
}

/**
 * Asserts clones `a` and `b` have the same refs (incl. remote-tracking), the same HEAD (symbolic
 * target and object), pass `git fsck --full`, and, if non-bare, the same clean checked-out tree.
 * Throws {@link CloneMismatchError} listing every difference, or `GitCommandError` if fsck fails.
 */
export async function assertSameClone(a: string, b: string): Promise<void> {
  const differences: string[] = [];
  const [refsA, refsB] = await Promise.all([refsOf(a), refsOf(b)]);
  for (const name of new Set([...Object.keys(refsA), ...Object.keys(refsB)])) {
    if (refsA[name] !== refsB[name]) {
      differences.push(`${name}: ${refsA[name] ?? "(missing)"} != ${refsB[name] ?? "(missing)"}`);
    }
  }
  const [symA, symB] = await Promise.all([symbolicHead(a), symbolicHead(b)]);
  if (symA !== symB) differences.push(`HEAD -> ${symA} != HEAD -> ${symB}`);

  await Promise.all([fsck(a), fsck(b)]);

  const [bareA, bareB] = await Promise.all([isBare(a), isBare(b)]);
  if (bareA !== bareB) differences.push(`bare: ${bareA} != ${bareB}`);
  if (!bareA && !bareB) differences.push(...await compareWorktrees(a, b));

  if (differences.length > 0) throw new CloneMismatchError(a, b, differences);
}

/** HEAD's target (`refs/heads/main`, unborn too), or `(detached)`. */
async function symbolicHead(dir: string): Promise<string> {
  try {
    return (await git(["symbolic-ref", "--quiet", "HEAD"], { cwd: dir })).trim();
  } catch (e) {
    if (e instanceof GitCommandError && e.code === 1) return "(detached)";
    throw e;
  }
}

async function fsck(dir: string): Promise<void> {
  await git(["fsck", "--full", "--no-progress"], { cwd: dir });
}

async function isBare(dir: string): Promise<boolean> {
  return (await git(["rev-parse", "--is-bare-repository"], { cwd: dir })).trim() === "true";
}

async function compareWorktrees(a: string, b: string): Promise<string[]> {
  const differences: string[] = [];
  const [indexA, indexB] = await Promise.all(
    [a, b].map((d) => git(["ls-files", "--stage"], { cwd: d })),
  );
  if (indexA !== indexB) differences.push("checked-out file lists or blob ids differ");
  for (const dir of [a, b]) {
    const status = await git(["status", "--porcelain", "--untracked-files=all"], { cwd: dir });
    if (status !== "") differences.push(`worktree of ${dir} is not clean:\n${status}`);
  }
  return differences;
}
