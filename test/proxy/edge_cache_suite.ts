/**
 * Edge suite part: The response cache and the credential memo: CI bursts, the memo's TTL, the cache off.
 * Registered per runtime by `edgeSuite` (edge_suite.ts).
 */
import { git } from "../support/git.ts";
import { addCommits, assertSameClone, makeRepo, refsOf } from "../support/fixtures.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { URI_CLONE } from "../support/traced_git.ts";
import { type Suite, warm } from "./edge_world.ts";

export function cacheCases({ t }: Suite): void {
  t("with the auth TTL at 0 every fetch goes to the origin", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 8, binaryBytes: 300_000 });
    await warm(w.edge, "r.git");
    w.origin.stats.reset();
    await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/edge`]);
    assertEquals(
      w.origin.stats.byPath["POST /r.git/git-upload-pack"]?.requests,
      2,
      "ls-refs, fetch",
    );
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/edge` });
  }, { edge: () => ({ authTtlSeconds: 0 }) });

  t(
    "CI bursts of shallow and partial clones: the origin computes each distinct pack once",
    async (w) => {
      await makeRepo(w.origin, "r.git", {
        commits: 25,
        branches: 2,
        tags: 2,
        binaryBytes: 200_000,
      });
      const url = `${w.edge.url}/r.git`;
      const direct = async (name: string, args: string[]) =>
        await w.git(["clone", "-q", ...args, w.origin.repoUrl("r.git"), `${w.dir}/${name}`]);
      const burst = async (name: string, args: string[], n: number) =>
        await Promise.all(
          Array.from({ length: n }, (_, i) =>
            w.git([...URI_CLONE, ...args, url, `${w.dir}/${name}${i}`])),
        );
      const same = async (a: string, b: string) => {
        await assertSameClone(`${w.dir}/${a}`, `${w.dir}/${b}`);
        const shallow = async (d: string) =>
          await Deno.readTextFile(`${w.dir}/${d}/.git/shallow`).catch(() => "");
        assertEquals(await shallow(b), await shallow(a), `${b}: same shallow boundary`);
        const objects = async (d: string) =>
          (await w.git(["rev-list", "--objects", "--all", "--missing=print"], {
            cwd: `${w.dir}/${d}`,
          }))
            .split("\n").sort().join("\n");
        assertEquals(await objects(b), await objects(a), `${b}: same objects`);
      };
      const metric = async (name: string, labels = "") => {
        const text = await (await fetch(`${w.edge.url}/_edge/metrics`)).text();
        const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `));
        return Number(line?.split(" ")[1] ?? 0);
      };
      await direct("d1", ["--depth", "1"]);
      await direct("dp", ["--filter=blob:none"]);
      w.origin.stats.reset();
      await burst("s", ["--depth", "1"], 4);
      await burst("p", ["--filter=blob:none"], 3);
      for (let i = 0; i < 4; i++) await same("d1", `s${i}`);
      for (let i = 0; i < 3; i++) await same("dp", `p${i}`);
      // Three distinct packs: depth 1, blob:none, and the blobs of the checkout that each partial
      // clone then fetches lazily (no `have` either: cached too).
      assertEquals(
        w.origin.stats.commands.fetch,
        3,
        `${JSON.stringify(w.origin.stats.commands)}\n${
          (await (await fetch(`${w.edge.url}/_edge/metrics`)).text()).split("\n").filter((l) =>
            l.includes("cache") || l.includes("passthrough")
          ).join("\n")
        }`,
      );
      assertEquals(await metric("gitedge_response_cache_total", '{result="miss"}'), 3, "misses");
      assertEquals(await metric("gitedge_response_cache_total", '{result="hit"}'), 7, "hits");
      assert(await metric("gitedge_response_cache_bytes_total") > 0, "bytes served from cache");

      // A new annotated tag on the same commit: include-tag answers must carry it, so no hit.
      const bare = `${w.origin.root}/r.git`;
      await w.git(["tag", "-a", "-m", "late tag", "late", "main"], { cwd: bare });
      await direct("d2", ["--depth", "1"]);
      w.origin.stats.reset();
      await burst("t", ["--depth", "1"], 2);
      await same("d2", "t0");
      await same("d2", "t1");
      assert((await refsOf(`${w.dir}/t0`))["refs/tags/late"], "the new tag came along");
      assertEquals(w.origin.stats.commands.fetch, 1, "one fetch for the new tag state");

      // The branch moves: clients want the new tip, a new key; never the old answer.
      await addCommits(w.origin, "r.git", { commits: 2 });
      await direct("d3", ["--depth", "1"]);
      await burst("m", ["--depth", "1"], 2);
      await same("d3", "m0");
      await same("d3", "m1");
      // Nothing else but answers in the cache's part of the store.
      const stored = await w.edge.listStored("cache/");
      assertEquals(stored.length, 5, stored.join(", "));
    },
  );

  t("without a credential memo, a cached answer is still served after a probe fetch", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 6, tags: 1 });
    // As actions/checkout fetches: one commit by id, depth 1, --no-tags (no include-tag).
    const tip = (await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"];
    // Three at once, then three more: concurrent misses wait for the first fill.
    const fetchOne = async (n: number) => {
      const cwd = `${w.dir}/s${n}`;
      await git(["init", "-q", cwd]);
      await git([
        ...URI_CLONE.slice(0, 4),
        "fetch",
        "-q",
        "--no-tags",
        "--depth=1",
        `${w.edge.url}/r.git`,
        `+${tip}:refs/remotes/origin/main`,
      ], { cwd });
      await git(["fsck", "--full"], { cwd });
    };
    // The same fetch straight from the origin: how many listings git itself makes (perhaps none).
    await git(["init", "-q", `${w.dir}/direct`]);
    await git([
      "fetch",
      "-q",
      "--no-tags",
      "--depth=1",
      w.origin.repoUrl("r.git"),
      `+${tip}:refs/remotes/origin/main`,
    ], { cwd: `${w.dir}/direct` });
    const own = w.origin.stats.commands["ls-refs"] ?? 0;
    w.origin.stats.reset();
    await Promise.all([0, 1, 2].map(fetchOne));
    await Promise.all([3, 4, 5].map(fetchOne));
    // The first fetch computed the pack; each of the six was vouched for first by a probe fetch
    // of its own, which costs the origin no pack (absent counts are 0: a bypass of the check
    // must show here), and no listing beyond the clones' own.
    const commands = JSON.stringify(w.origin.stats.commands);
    assertEquals(w.origin.stats.commands.fetch ?? 0, 1, `one fetch: ${commands}`);
    assertEquals(w.origin.stats.commands["fetch-probe"] ?? 0, 6, `a probe each: ${commands}`);
    assert((w.origin.stats.commands["ls-refs"] ?? 0) <= 6 * own, `no other listing: ${commands}`);
  }, { edge: () => ({ authTtlSeconds: 0 }) });

  t("the response cache off: every shallow clone goes to the origin", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 6 });
    for (const n of [0, 1]) {
      await w.git([...URI_CLONE, "--depth", "1", `${w.edge.url}/r.git`, `${w.dir}/s${n}`]);
    }
    assertEquals(w.origin.stats.commands.fetch, 2, "two fetches");
    assertEquals((await w.edge.listStored("cache/")).length, 0, "nothing stored");
  }, { edge: () => ({ responseCacheBytes: 0 }) });
}
