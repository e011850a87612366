/**
 * The operator's page and per-repository metrics on the Worker (workerd via Miniflare): the
 * registry in R2, the snapshot state from the repository's Durable Object.
 */
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { URI_CLONE } from "../../proxy/edge_suite.ts";
import { listBucket, MINIFLARE_LEAKS, startWorkerEdge } from "../../support/worker_harness.ts";

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test(
  { name: "[worker] the operator's page lists a warm repository", ...MINIFLARE_LEAKS },
  async () => {
    await using origin = await startOrigin();
    const app = await makeRepo(origin, "team/app.git", { commits: 6, binaryBytes: 100_000 });
    // The store's size and per-repository metrics are the operator's: the admin token's
    // (docs/access.md).
    const admin = { authorization: "Bearer op-t0ken" };
    await using worker = await startWorkerEdge({
      config: { origin: origin.url, chunks: 2, adminToken: "op-t0ken" },
    });
    await using dir = await tempDir();
    await git([...URI_CLONE, `${worker.url}/team/app.git`, `${dir.path}/first`]);
    const warm = await fetch(`${worker.url}/_edge/warm/team/app.git`, {
      method: "POST",
      headers: admin,
    });
    const warmed = await warm.json();
    assertEquals(warmed.snapshot.state, "ready", JSON.stringify(warmed));
    assert(Date.parse(warmed.snapshot.builtAt) > 0, `ISO 8601: ${warmed.snapshot.builtAt}`);
    await git([...URI_CLONE, `${worker.url}/team/app.git`, `${dir.path}/second`]);
    await git(["clone", "-q", app.url, `${dir.path}/direct`]);
    await assertSameClone(`${dir.path}/second`, `${dir.path}/direct`);

    const o = await (await fetch(`${worker.url}/_edge/repos`, { headers: admin })).json();
    const r = o.repositories.find((x: { path: string }) => x.path === "team/app.git");
    assert(r, JSON.stringify(o));
    assertEquals([r.state, r.builds, r.fetches, r.fromSnapshot], ["ready", 1, 2, 1]);
    assert(r.originBytesSaved > 0 && r.bytes > 0, JSON.stringify(r));
    assert(o.store.bytes >= r.bytes, JSON.stringify(o.store));
    const page = await fetch(`${worker.url}/_edge/`, { headers: admin });
    assertEquals(page.status, 200);
    assertMatch(await page.text(), /<td class="path">team\/app\.git<\/td>/);
    const metrics = await (await fetch(`${worker.url}/_edge/metrics`, { headers: admin })).text();
    assertMatch(metrics, /^gitedge_repo_fetches_total\{repo="team\/app\.git"\} 2$/m);
    const anonymous = await (await fetch(`${worker.url}/_edge/metrics`)).text();
    assert(!anonymous.includes("team/app.git"), "no repository named without the token");
    assertMatch(
      metrics,
      /^gitedge_request_duration_seconds_count\{route="git-upload-pack"\} \d+$/m,
    );
    // The registry's record reached R2 (written in the background after the requests).
    for (let i = 0; i < 50 && (await listBucket(worker, "registry/")).length === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    assertEquals((await listBucket(worker, "registry/")).length, 1);
  },
);

Deno.test({
  name: "[worker] STORE_MAX_BYTES evicts the least recently used snapshot from R2",
  ...MINIFLARE_LEAKS,
}, async () => {
  await using origin = await startOrigin();
  for (const [i, name] of ["a.git", "b.git"].entries()) {
    await makeRepo(origin, name, { commits: 6, binaryBytes: 150_000, seed: 3 + i });
  }
  // One snapshot of these is about 430 KB: the cap holds one, not two.
  const admin = { authorization: "Bearer op-t0ken" };
  await using worker = await startWorkerEdge({
    config: { origin: origin.url, chunks: 2, adminToken: "op-t0ken" },
    vars: { STORE_MAX_BYTES: String(600_000) },
  });
  await using dir = await tempDir();
  const packsOf = async () =>
    new Set(
      (await listBucket(worker, "repos/")).filter((k) => k.endsWith(".pack")).map((k) =>
        k.split("/")[1]
      ),
    );
  for (const name of ["a.git", "b.git"]) {
    const warm = await fetch(`${worker.url}/_edge/warm/${name}`, {
      method: "POST",
      headers: admin,
    });
    assertEquals(warm.status, 200, await warm.text());
  }
  // The sweep after b's warm runs in the background: wait for a's packs to go.
  let held = await packsOf();
  for (let i = 0; i < 100 && held.size > 1; i++) {
    await new Promise((r) => setTimeout(r, 100));
    held = await packsOf();
  }
  assertEquals(held.size, 1, "one snapshot left");
  const o = await (await fetch(`${worker.url}/_edge/repos`, { headers: admin })).json();
  const a = o.repositories.find((x: { path: string }) => x.path === "a.git");
  assertEquals([a?.state, a?.evictions], ["evicted", 1], JSON.stringify(o));
  assert(o.store.bytes <= 600_000, JSON.stringify(o.store));
  // a's next clone passes through (its packs are gone) and equals a direct clone.
  await git([...URI_CLONE, `${worker.url}/a.git`, `${dir.path}/a`]);
  await git(["clone", "-q", origin.repoUrl("a.git"), `${dir.path}/a-direct`]);
  await assertSameClone(`${dir.path}/a`, `${dir.path}/a-direct`);
});
