/**
 * The awkward-cases fixture: one repository holding what real repositories have and simple
 * fixtures lack. Unicode and slash-heavy ref names, annotated tags pointing at a blob, a tree and
 * another tag, a lightweight tag, an empty-tree commit, a symlink, a submodule (relative URL, so
 * it resolves through whatever server the superproject was cloned from), an unmerged branch with
 * its own tag, dated history (for `--shallow-since`), and enough random bytes that a snapshot of
 * it splits into several packs.
 */
import { git, GIT_ENV } from "./git.ts";
import type { Origin } from "./origin.ts";
import { SeededRandom } from "./random.ts";

/** What {@link makeAwkwardRepo} made. */
export interface AwkwardRepo {
  /** Repository name at the origin. */
  name: string;
  /** The submodule's repository name at the origin. */
  submodule: string;
  /** A branch that is not merged into main and carries its own tag. */
  sideBranch: string;
  /** A date inside the history, for `--shallow-since`. */
  midDate: string;
}

const DAY = 86_400;
const START = 1_577_836_800; // 2020-01-01T00:00:00Z

/**
 * Creates `<name>` and its submodule `<name minus .git>-sub.git` at `origin` (pushed from a
 * scratch work tree with the origin's own git, so `objectFormat` decides both).
 */
export async function makeAwkwardRepo(
  origin: Origin,
  name: string,
  scratch: string,
  opts: { objectFormat?: "sha1" | "sha256" } = {},
): Promise<AwkwardRepo> {
  const objectFormat = opts.objectFormat ?? "sha1";
  const subName = name.replace(/\.git$/, "") + "-sub.git";
  const rng = new SeededRandom(42);
  let day = 0;
  const at = (cwd: string) => (args: string[]) => {
    day++;
    const date = `${START + day * DAY} +0000`;
    return git(args, {
      cwd,
      env: { ...GIT_ENV, GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date },
    });
  };

  // The submodule: a small repository of its own.
  const sub = `${scratch}/sub`;
  await git(["init", "-q", "-b", "main", `--object-format=${objectFormat}`, sub]);
  const inSub = at(sub);
  await Deno.writeTextFile(`${sub}/lib.txt`, "a library\n");
  await inSub(["add", "."]);
  await inSub(["commit", "-q", "-m", "library"]);
  await origin.createBare(subName, { objectFormat });
  await inSub(["push", "-q", `${origin.root}/${subName}`, "main"]);

  const work = `${scratch}/work`;
  await git(["init", "-q", "-b", "main", `--object-format=${objectFormat}`, work]);
  const run = at(work);
  await run(["remote", "add", "origin", origin.repoUrl(name)]);
  await Deno.mkdir(`${work}/deep/er/and/deeper`, { recursive: true });
  await Deno.writeTextFile(`${work}/README.md`, "awkward\n");
  await Deno.writeTextFile(`${work}/deep/er/and/deeper/f.txt`, "deep\n");
  await Deno.writeTextFile(`${work}/ünïcödé näme.txt`, "unicode path\n");
  await Deno.symlink("README.md", `${work}/link-to-readme`);
  await Deno.writeFile(`${work}/random.bin`, rng.bytes(200_000));
  await run(["add", "."]);
  await run(["commit", "-q", "-m", "first"]);
  // A commit whose tree is empty.
  await run(["rm", "-q", "-r", "."]);
  await run(["commit", "-q", "-m", "empty tree"]);
  await run(["checkout", "-q", "HEAD~1", "--", "."]);
  await run(["commit", "-q", "-m", "restored"]);
  // The submodule, by a URL relative to the superproject's own.
  // (`../x-sub.git` resolves against the remote: the submodule is cloned from the origin.)
  await git(["submodule", "add", "-q", `../${subName}`, "sub"], { cwd: work });
  await run(["commit", "-q", "-m", "a submodule"]);
  for (let i = 0; i < 6; i++) {
    await Deno.writeFile(`${work}/random-${i}.bin`, rng.bytes(60_000));
    await Deno.writeTextFile(`${work}/README.md`, `awkward ${i}\n`);
    await run(["add", "."]);
    await run(["commit", "-q", "-m", `step ${i}`]);
    if (i === 1) await run(["tag", "-a", "-m", "release", "v1.0"]);
  }
  const midDate = new Date((START + 6 * DAY) * 1000).toISOString().slice(0, 10);
  await run(["tag", "light"]);
  await run(["tag", "-a", "-m", "a tag of a tag", "tag-of-tag", "v1.0"]);
  await run(["tag", "-a", "-m", "a tag of a blob", "blob-tag", "HEAD:README.md"]);
  await run(["tag", "-a", "-m", "a tag of a tree", "tree-tag", "HEAD^{tree}"]);
  await run(["tag", "-a", "-m", "unicode", "v2/ünï"]);
  await run(["branch", "ünï/ブランチ", "HEAD~2"]);
  await run(["branch", "a/b/c/d/e/f/g/h", "HEAD~3"]);
  // An unmerged side branch with a tag of its own.
  const side = "side/only";
  await run(["checkout", "-q", "-b", side]);
  await Deno.writeFile(`${work}/side.bin`, rng.bytes(50_000));
  await run(["add", "."]);
  await run(["commit", "-q", "-m", "side"]);
  await run(["tag", "-a", "-m", "on the side", "side-tag"]);
  await run(["checkout", "-q", "main"]);

  await origin.createBare(name, { objectFormat });
  await git(["push", "-q", "--mirror", `${origin.root}/${name}`], { cwd: work });
  return { name, submodule: subName, sideBranch: side, midDate };
}
