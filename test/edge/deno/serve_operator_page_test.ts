/**
 * The operator's page (`/_edge/`, `/_edge/repos`) on the Deno server with a warm repository:
 * rendered by a real headless browser, its JSON, its access rule, and build counters that
 * survive a restart.
 */
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { URI_CLONE } from "../../proxy/edge_suite.ts";
import { chromiumMissing, dumpDom, screenshot } from "../../support/chromium.ts";
import { withinDeadline } from "../../support/deadline.ts";

const noChromium = await chromiumMissing();
if (noChromium) console.warn(`operator page: skipping the browser test: ${noChromium}`);

/** An origin with `team/app.git`, an edge cloned through twice (the second answered by URIs). */
async function warmEdge(store: string, opts: { adminToken?: string } = {}) {
  const origin = await startOrigin();
  const fixture = await makeRepo(origin, "team/app.git", { commits: 8, binaryBytes: 100_000 });
  const edge = await startDenoEdge({
    store,
    config: { origin: origin.url, chunks: 2, ...opts },
    onBuildError: () => {},
  });
  return { origin, edge, fixture };
}

Deno.test({
  name: "[deno] the operator's page renders in headless chromium with a warm repository",
  ignore: noChromium !== null,
  sanitizeResources: false, // chromium's pipes are closed by Deno.Command's output()
  fn: async () => {
    await using dir = await tempDir();
    const store = `${dir.path}/store`;
    const { origin, edge, fixture } = await warmEdge(store);
    try {
      await git([...URI_CLONE, `${edge.url}/team/app.git`, `${dir.path}/c1`]);
      await edge.idle();
      await git([...URI_CLONE, `${edge.url}/team/app.git`, `${dir.path}/c2`]);
      await git(["clone", "-q", fixture.url, `${dir.path}/direct`]);
      await assertSameClone(`${dir.path}/c2`, `${dir.path}/direct`);
      const dom = await dumpDom(`${edge.url}/_edge/`);
      assertMatch(dom, /<title>gitedge<\/title>/);
      assertMatch(dom, /<td class="path">team\/app\.git<\/td>/);
      assertMatch(dom, /<span class="st ready">ready<\/span>/);
      // Two fetches, the second from the snapshot: 50%.
      assertMatch(dom, /<td class="n">2<\/td><td class="n">50%<\/td>/);
      const png = Deno.env.get("GITEDGE_SCREENSHOT") ?? `${dir.path}/page.png`;
      await screenshot(`${edge.url}/_edge/`, png);
      const bytes = await Deno.readFile(png);
      assertEquals([...bytes.subarray(1, 4)], [0x50, 0x4e, 0x47], "a PNG");
      assert(bytes.length > 5000, `a page, not a blank (${bytes.length} bytes)`);
    } finally {
      await edge.stop();
      await origin.stop();
    }
  },
});

Deno.test("[deno] /_edge/repos: the page's JSON, ISO times, admin token, counters across a restart", async () => {
  await using dir = await tempDir();
  const store = `${dir.path}/store`;
  const token = "t0ken-for-the-page";
  const auth = { authorization: `Bearer ${token}` };
  let { origin, edge } = await warmEdge(store, { adminToken: token });
  try {
    await git([...URI_CLONE, `${edge.url}/team/app.git`, `${dir.path}/c1`]);
    await edge.idle();
    await git([...URI_CLONE, `${edge.url}/team/app.git`, `${dir.path}/c2`]);
    for (const path of ["/_edge/", "/_edge/repos"]) {
      const refused = await fetch(`${edge.url}${path}`);
      await refused.body?.cancel();
      assertEquals(refused.status, 401, `${path} without the token`);
    }
    const page = await fetch(`${edge.url}/_edge/`, { headers: auth });
    assertEquals(page.status, 200);
    assertMatch(page.headers.get("content-type") ?? "", /text\/html/);
    assertMatch(await page.text(), /team\/app\.git/);
    const o = await (await fetch(`${edge.url}/_edge/repos`, { headers: auth })).json();
    assertEquals(o.repositories.length, 1, JSON.stringify(o));
    const r = o.repositories[0];
    assertEquals([r.path, r.state, r.builds, r.fetches, r.fromSnapshot], [
      "team/app.git",
      "ready",
      1,
      2,
      1,
    ]);
    assert(r.packs >= 1 && r.bytes > 0, JSON.stringify(r));
    assert(
      r.originBytesSaved >= r.bytes,
      `the second clone's packs came from the edge: ${JSON.stringify(r)}`,
    );
    assert(Date.parse(r.builtAt) > 0 && r.builtAt.endsWith("Z"), r.builtAt);
    assert(r.lastBuild.durationSeconds >= 0, JSON.stringify(r.lastBuild));
    assert(o.store.bytes >= r.bytes, JSON.stringify(o.store));
    const status = await (await fetch(`${edge.url}/_edge/status/team/app.git`, { headers: auth }))
      .json();
    assertEquals(status.snapshot.builtAt, r.builtAt, "status times are ISO 8601 too");

    // A restart on the same store: the build count and the traffic are still there.
    await edge.stop();
    edge = await startDenoEdge({
      store,
      config: { origin: origin.url, chunks: 2, adminToken: token },
    });
    const again = await (await fetch(`${edge.url}/_edge/repos`, { headers: auth })).json();
    const r2 = again.repositories[0];
    assertEquals([r2?.path, r2?.builds, r2?.fetches, r2?.state], ["team/app.git", 1, 2, "ready"]);
    const metrics = await (await fetch(`${edge.url}/_edge/metrics`)).text();
    assertMatch(metrics, /^gitedge_store_bytes [1-9]\d*$/m);
    assertMatch(
      metrics,
      /^gitedge_request_duration_seconds_bucket\{route="repos",le="\+Inf"\} 1$/m,
    );
  } finally {
    await withinDeadline(edge.stop(), "edge stop");
    await origin.stop();
  }
});

Deno.test("[deno] without an admin token the page lists only what the origin lets the caller read", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin({ requireAuth: { user: "u", password: "p" } });
  await makeRepo(origin, "secret.git", { commits: 3 });
  const edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url },
    onBuildError: () => {},
  });
  try {
    const basic = `Basic ${btoa("u:p")}`;
    const url = new URL(`${edge.url}/secret.git`);
    url.username = "u";
    url.password = "p";
    await git([...URI_CLONE, url.href, `${dir.path}/c1`]);
    await edge.idle();
    const anonymous = await (await fetch(`${edge.url}/_edge/repos`)).json();
    assertEquals(anonymous.repositories, [], "an anonymous caller sees nothing");
    // Nor how many it does not see, nor the store's size (docs/access.md).
    assertEquals([anonymous.notListed, anonymous.store], [null, null]);
    const page = await (await fetch(`${edge.url}/_edge/`)).text();
    assert(!page.includes("secret.git"), "nor does the page name it");
    const owner = await (await fetch(`${edge.url}/_edge/repos`, {
      headers: { authorization: basic },
    })).json();
    assertEquals(owner.repositories.map((r: { path: string }) => r.path), ["secret.git"]);
  } finally {
    await edge.stop();
  }
});
