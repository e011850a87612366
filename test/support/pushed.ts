/** Moving an origin's repository on by a push of commits of incompressible data. */
import { git, gitBytes } from "./git.ts";
import type { Origin } from "./origin.ts";
import { SeededRandom } from "./random.ts";

/**
 * Pushes `commits` commits to the origin's repository `repo` (its `main`), each adding `bytes` of incompressible data
 * (so a pack of them is plainly larger than any listing); the old tip, the new one, and the size
 * of a pack of just the new objects (what the origin sends for them once).
 */
export async function pushCommits(
  origin: Origin,
  repo: string,
  dir: string,
  commits = 3,
  bytes = 64 * 1024,
): Promise<{ old: string; tip: string; packBytes: number }> {
  const bare = `${origin.root}/${repo}`;
  const work = `${dir}/work-${crypto.randomUUID().slice(0, 8)}`;
  await git(["clone", "-q", "--branch", "main", bare, work]);
  const old = (await git(["rev-parse", "HEAD"], { cwd: work })).trim();
  const rng = new SeededRandom(commits * 7919 + bytes);
  for (let i = 0; i < commits; i++) {
    await Deno.writeFile(`${work}/pushed-${old.slice(0, 8)}-${i}.bin`, rng.bytes(bytes));
    await git(["add", "-A"], { cwd: work });
    await git(["commit", "-q", "-m", `pushed ${i}`], { cwd: work });
  }
  await git(["push", "-q", "origin", "main"], { cwd: work });
  const tip = (await git(["rev-parse", "HEAD"], { cwd: work })).trim();
  const pack = await gitBytes(["pack-objects", "--revs", "--stdout", "-q"], {
    cwd: bare,
    stdin: new TextEncoder().encode(`${tip}\n^${old}\n`),
  });
  return { old, tip, packBytes: pack.byteLength };
}
