/**
 * A tight store cap never thrashes (issue #34): with one repository pinned (its pack URLs just
 * handed out) and a second one warmed, the second's snapshot (just built, never cloned) is not
 * evicted before it served, so its clones come from it and the origin computes its full pack once;
 * with the store then over its cap by what it must keep, a third repository's warm says so (507,
 * not `ready`) and its clones pass through without starting builds; `store.full` is logged once.
 */
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { URI_CLONE } from "../../proxy/edge_suite.ts";
import { repoId } from "../../../src/proxy/core/repo.ts";
import { createLogger } from "../../../src/proxy/core/log.ts";

async function bytesUnder(path: string): Promise<number> {
  let n = 0;
  for await (const e of Deno.readDir(path)) {
    const p = `${path}/${e.name}`;
    n += e.isDirectory ? await bytesUnder(p) : e.isFile ? (await Deno.stat(p)).size : 0;
  }
  return n;
}

Deno.test("[deno] a pinned repository and a second one under a tight cap: the origin computes the second's full pack once; a third waits, logged once", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  for (const [i, name] of ["a.git", "b.git", "c.git"].entries()) {
    await makeRepo(origin, name, { commits: 6, binaryBytes: 150_000, seed: 31 + i });
    await git(["clone", "-q", origin.repoUrl(name), `${dir.path}/direct-${name}`]);
  }
  // One snapshot's size, on an edge without a cap.
  let one: number;
  {
    await using probe = await startDenoEdge({
      store: `${dir.path}/probe`,
      config: { origin: origin.url },
    });
    const warm = await fetch(`${probe.url}/_edge/warm/a.git`, { method: "POST" });
    assertEquals(warm.status, 200, await warm.text());
    one = await bytesUnder(`${dir.path}/probe/repos/${repoId(`${origin.url}/a.git`)}`);
  }
  const logs: string[] = [];
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url, chunks: 2, urlTtlSeconds: 600, storeMaxBytes: one * 1.5 },
    log: createLogger({ write: (line) => logs.push(line) }),
    onBuildError: () => {},
  });
  let n = 0;
  const clone = async (name: string) => {
    const out = `${dir.path}/c${n++}`;
    await git([...URI_CLONE, `${edge.url}/${name}`, out]);
    await edge.idle();
    await assertSameClone(out, `${dir.path}/direct-${name}`);
  };
  const fetches = () => origin.stats.commands.fetch ?? 0;

  // a.git: built, then cloned by URI: pinned for the URLs' lifetime.
  await clone("a.git");
  await clone("a.git");

  // b.git: warmed (one full pack), then cloned three times from its snapshot.
  const before = fetches();
  const warm = await fetch(`${edge.url}/_edge/warm/b.git`, { method: "POST" });
  const warmed = await warm.json();
  assertEquals([warm.status, warmed.snapshot.state], [200, "ready"], JSON.stringify(warmed));
  await edge.idle();
  for (let i = 0; i < 3; i++) await clone("b.git");
  assertEquals(fetches() - before, 1, `the origin computed b.git's pack once\n${logs.join("\n")}`);
  assert(!logs.some((l) => l.includes('"store.evict"')), "nothing was evicted: all pinned");

  // The store is over its cap by what it must keep: c.git is not built.
  const full = logs.filter((l) => l.includes('"store.full"'));
  assertEquals(full.length, 1, logs.join("\n"));
  const refused = await fetch(`${edge.url}/_edge/warm/c.git`, { method: "POST" });
  const body = await refused.json();
  assertEquals(refused.status, 507, JSON.stringify(body));
  assert(body.snapshot.state !== "ready", JSON.stringify(body));
  const beforeC = fetches();
  await clone("c.git");
  await clone("c.git");
  // The first passed through (its answer kept by the response cache, which served the second);
  // neither started a build, which would have asked the origin once more.
  assert(fetches() - beforeC <= 2, `${fetches() - beforeC} fetches for two clones of c.git`);
  const skipped = await (await fetch(`${edge.url}/_edge/metrics`)).text();
  assert(/^gitedge_store_full_builds_skipped_total [1-9]/m.test(skipped), "builds were skipped");
  assertEquals(logs.filter((l) => l.includes('"store.full"')).length, 1, "logged once");
  assert(!logs.some((l) => l.includes('"build.start"') && l.includes("c.git")), "no build of c");
});
