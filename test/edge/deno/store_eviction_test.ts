/**
 * A bounded store (`storeMaxBytes`) on the Deno server with several repositories: least recently
 * cloned snapshots go first, pinned ones (pack URLs handed out within their lifetime) stay, every
 * clone still equals a direct clone (an evicted repository's passes through and rebuilds), and
 * the store ends under its cap plus what is pinned.
 */
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { tracedGit, URI_CLONE, urisFetched } from "../../proxy/edge_suite.ts";
import { repoId } from "../../../src/proxy/core/repo.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { createLogger } from "../../../src/proxy/core/log.ts";

const TTL = 60;
/** Past every pin: the URL lifetime plus the expiry's bucket (a quarter of it), plus a second. */
const PAST_PINS_MS = (TTL + TTL / 4 + 1) * 1000;

/** Bytes under `dir`, per first-level entry. */
async function sizes(dir: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const walk = async (path: string): Promise<number> => {
    let n = 0;
    for await (const e of Deno.readDir(path)) {
      const p = `${path}/${e.name}`;
      n += e.isDirectory ? await walk(p) : e.isFile ? (await Deno.stat(p)).size : 0;
    }
    return n;
  };
  try {
    for await (const e of Deno.readDir(dir)) out.set(e.name, await walk(`${dir}/${e.name}`));
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return out;
}

Deno.test("[deno] a store over its cap evicts the least recently cloned snapshots, never pinned packs, and every clone stays right", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const names = ["a.git", "b.git", "c.git", "d.git"];
  for (const [i, name] of names.entries()) {
    await makeRepo(origin, name, { commits: 6, binaryBytes: 150_000, seed: 7 + i });
  }
  const idOf = (name: string) => repoId(`${origin.url}/${name}`);
  const store = `${dir.path}/store`;
  // One snapshot's size, measured on an edge without a cap.
  let one: number;
  {
    const probe = await startDenoEdge({
      store: `${dir.path}/probe`,
      config: { origin: origin.url },
    });
    try {
      const warm = await fetch(`${probe.url}/_edge/warm/a.git`, { method: "POST" });
      assertEquals(warm.status, 200, await warm.text());
      one = (await sizes(`${dir.path}/probe/repos`)).get(idOf("a.git"))!;
    } finally {
      await probe.stop();
    }
  }
  const cap = Math.floor(one * 2.5);
  let offset = 0;
  const logs: string[] = [];
  const edge = await startDenoEdge({
    store,
    config: { origin: origin.url, chunks: 2, urlTtlSeconds: TTL, storeMaxBytes: cap },
    clock: { now: () => Date.now() + offset },
    log: createLogger({ write: (line) => logs.push(line) }),
    onBuildError: (path, err) => logs.push(`build of ${path} failed: ${err}`),
  });
  let n = 0;
  /** Clones `name` through the edge; checks it against a direct clone; returns its pack URIs. */
  const clone = async (name: string) => {
    const out = `${dir.path}/c${n++}`;
    const trace = await withinDeadline(
      tracedGit([...URI_CLONE, `${edge.url}/${name}`, out]),
      `clone ${name}`,
    );
    await withinDeadline(edge.idle(), "the edge's builds and sweeps");
    await git(["clone", "-q", origin.repoUrl(name), `${out}-direct`]);
    await assertSameClone(out, `${out}-direct`);
    return urisFetched(trace).map((u) => u.uri);
  };
  const snapshotBytes = async () => {
    let total = 0;
    for (const bytes of (await sizes(`${store}/repos`)).values()) total += bytes;
    return total;
  };
  const held = async () => {
    const s = await sizes(`${store}/repos`);
    // A repository evicted keeps only its small state.json.
    return names.filter((name) => (s.get(idOf(name)) ?? 0) > one / 2);
  };
  try {
    // a and b: built, cloned from their snapshots, then their pins lapse.
    for (const name of ["a.git", "b.git"]) {
      await clone(name);
      assertEquals((await clone(name)).length, 2, `${name}'s second clone got its packs by URI`);
      offset += PAST_PINS_MS;
    }
    assertEquals(await held(), ["a.git", "b.git"]);
    // c: its build takes the store over the cap: a, the least recently cloned, goes.
    await clone("c.git");
    assertEquals(await held(), ["b.git", "c.git"]);
    assert(await snapshotBytes() <= cap, `under the cap: ${await snapshotBytes()} <= ${cap}`);
    // c and then d cloned from their snapshots: both pinned now (the clock stays).
    const cUris = await clone("c.git");
    assertEquals(cUris.length, 2);
    await clone("d.git");
    assertEquals(await held(), ["c.git", "d.git"], "b went (unpinned), c stayed (pinned)");
    await clone("d.git");
    // a again: evicted, so its clone passes through (no URIs) and starts a fresh build. That
    // build takes the store over the cap; c and d are pinned: a, the least recently cloned of
    // the others, goes again. Strictly by the cap.
    assertEquals(await clone("a.git"), [], "an evicted repository's clone passes through");
    assertEquals(await held(), ["c.git", "d.git"], "pinned c and d stay");
    assert(await snapshotBytes() <= cap, `under the cap: ${await snapshotBytes()} <= ${cap}`);
    for (const uri of cUris) {
      const res = await fetch(uri);
      await res.body?.cancel();
      assertEquals(res.status, 200, "a pack handed out within its URL's lifetime is still there");
    }
    // The pins lapse: a's next build evicts c, now the least recently cloned.
    offset += PAST_PINS_MS;
    assertEquals(await clone("a.git"), []);
    assertEquals(await held(), ["a.git", "d.git"]);
    assert(await snapshotBytes() <= cap, `under the cap: ${await snapshotBytes()} <= ${cap}`);
    assertEquals((await clone("a.git")).length, 2, "rebuilt, its packs go by URI again");
    assertEquals(await clone("c.git"), [], "c, evicted, passes through");

    const metrics = await (await fetch(`${edge.url}/_edge/metrics`)).text();
    const evictions = Number(/^gitedge_store_evictions_total (\d+)/m.exec(metrics)?.[1]);
    assert(evictions >= 3, `evictions counted: ${evictions}`);
    assertMatch(metrics, new RegExp(`^gitedge_store_max_bytes ${cap}$`, "m"));
    const evicted = logs.filter((l) => l.includes('"event":"store.evict"'));
    // The text the docs quote is the one logged.
    assert(
      evicted.every((l) => /"message":"gitedge: evicted the snapshot of \S+ \(\d+ bytes/.test(l)),
      evicted.join("\n"),
    );
    assert(
      evicted.some((l) => l.includes("a.git")) && evicted.some((l) => l.includes("b.git")),
      logs.join("\n"),
    );
    const o = await (await fetch(`${edge.url}/_edge/repos`)).json();
    const b = o.repositories.find((r: { path: string }) => r.path === "b.git");
    assertEquals([b.state, b.evictions], ["evicted", 1], JSON.stringify(b));
  } catch (error) {
    // What the edge logged, and the store by repository, to tell what went where.
    console.error(logs.join("\n"));
    console.error(names.map((name) => [name, idOf(name)]), await sizes(`${store}/repos`));
    throw error;
  } finally {
    await edge.stop();
  }
});
