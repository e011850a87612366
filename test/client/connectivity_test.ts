import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import {
  checkConnectivity,
  cutPoints,
  planWalks,
  SPLIT_MIN_BYTES,
} from "../../src/client/connectivity.ts";
import { ConnectivityError } from "../../src/client/errors.ts";
import { git, tempDir } from "../support/git.ts";

/**
 * A bare repository of `n` commits on main (loose objects, one new file each, a day apart) with a
 * lightweight tag `t<i>` on each; returns the commits oldest first and each one's new blob.
 */
async function history(dir: string, n: number) {
  await git(["init", "-q", "--initial-branch=main", `${dir}/work`]);
  const commits: string[] = [];
  const blobs: string[] = [];
  for (let i = 1; i <= n; i++) {
    await Deno.writeTextFile(`${dir}/work/f${i}.txt`, `file ${i}\n`);
    await git(["add", "."], { cwd: `${dir}/work` });
    const date = `${1_600_000_000 + i * 86_400} +0000`;
    await git(["commit", "-q", "-m", `c${i}`], {
      cwd: `${dir}/work`,
      env: { GIT_COMMITTER_DATE: date, GIT_AUTHOR_DATE: date },
    });
    await git(["tag", `t${i}`], { cwd: `${dir}/work` });
    commits.push((await git(["rev-parse", "HEAD"], { cwd: `${dir}/work` })).trim());
    blobs.push((await git(["rev-parse", `HEAD:f${i}.txt`], { cwd: `${dir}/work` })).trim());
  }
  const gitDir = `${dir}/work/.git`;
  const loose = (oid: string) => `${gitDir}/objects/${oid.slice(0, 2)}/${oid.slice(2)}`;
  return { gitDir, commits, blobs, loose };
}

Deno.test("planWalks: wants minus the first cut, each cut minus the next, the last cut whole", () => {
  assertEquals(planWalks(["a", "b"], []), [["a", "b"]]);
  assertEquals(planWalks(["a", "b"], ["m"]), [["a", "b", "^m"], ["m"]]);
  assertEquals(planWalks(["a"], ["m", "n"]), [["a", "^m"], ["m", "^n"], ["n"]]);
});

Deno.test("checkConnectivity splits a big clone's walk at a ref's commit and still finds every missing object", async (t) => {
  await using dir = await tempDir("gitedge-connectivity-");
  const repo = await history(dir.path, 8);
  const wants = [...repo.commits].reverse(); // the tags' commits, as ls-refs lists them

  await t.step(
    "the cut is the refs' median commit by date; one ref or none gives none",
    async () => {
      assertEquals(await cutPoints(repo.gitDir, wants, 1), [repo.commits[3]]);
      assertEquals(await cutPoints(repo.gitDir, [wants[0], wants[0]], 1), []);
      const three = await cutPoints(repo.gitDir, wants, 3);
      assertEquals(three, [repo.commits[5], repo.commits[3], repo.commits[1]]);
    },
  );

  await t.step("a complete repository passes in two walks (one below the size bound)", async () => {
    assertEquals(await checkConnectivity(repo.gitDir, wants, { walks: 2 }), 2);
    const small = { walks: 2, packBytes: SPLIT_MIN_BYTES - 1 };
    assertEquals(await checkConnectivity(repo.gitDir, wants, small), 1);
  });

  // Objects only the newer part reaches, only the older part reaches, and the cut's own commit.
  for (
    const [label, victim] of [
      ["a blob of the newest commit", () => repo.blobs[7]],
      ["a blob of the oldest commit", () => repo.blobs[0]],
      ["the cut's commit", () => repo.commits[3]],
    ] as const
  ) {
    await t.step(`missing ${label}: ConnectivityError from the split walk`, async () => {
      const oid = victim();
      const file = repo.loose(oid);
      const bytes = await Deno.readFile(file);
      await Deno.remove(file);
      try {
        const error = await assertRejects(
          () => checkConnectivity(repo.gitDir, wants, { walks: 2 }),
          ConnectivityError,
        );
        assert(error.message.length > 0);
      } finally {
        await Deno.writeFile(file, bytes);
      }
      assertEquals(await checkConnectivity(repo.gitDir, wants, { walks: 2 }), 2, "restored");
    });
  }
});
