/** LFS objects in a capped store on the Deno server: counted, evicted least recently used, never pinned ones. */
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { assert, assertEquals } from "../../support/assert.ts";
import { tempDir } from "../../support/git.ts";
import { lfsGit, makeLfsRepo, startLfsOrigin } from "../../support/lfs_origin.ts";
import { SeededRandom } from "../../support/random.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { createLogger } from "../../../src/proxy/core/log.ts";
import { lfsObjectKey } from "../../../src/proxy/lfs/lfs_urls.ts";

const ADMIN = "lfs-eviction-admin-token";

const TTL = 60;
/** Past every pin: the URL lifetime plus the expiry's bucket (a quarter of it), plus a second. */
const PAST_PINS_MS = (TTL + TTL / 4 + 1) * 1000;
/** Enough for a sweep to be due (30 s apart), short of a pin's end. */
const NEXT_SWEEP_MS = 31_000;

Deno.test("[deno] lfs: LFS objects count against the store cap, least recently used go first, never one a URL handed out may fetch", async () => {
  await using dir = await tempDir();
  await using origin = await startLfsOrigin({ users: { alice: "pw" } });
  const oids: Record<string, string> = {};
  for (const [i, name] of ["x", "y", "z"].entries()) {
    const made = await makeLfsRepo(
      origin,
      `${name}.git`,
      { [`${name}.bin`]: new SeededRandom(40 + i).bytes(100_000) },
      "alice:pw",
    );
    oids[name] = made[`${name}.bin`];
  }
  let offset = 0;
  const logs: string[] = [];
  const edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url, urlTtlSeconds: TTL, storeMaxBytes: 90_000, adminToken: ADMIN },
    clock: { now: () => Date.now() + offset },
    log: createLogger({ write: (line) => logs.push(line) }),
  });
  let n = 0;
  const clone = async (name: string) => {
    await withinDeadline(
      lfsGit(["clone", "-q", `${edge.url}/${name}.git`, `${dir.path}/c${n++}`]),
      `clone ${name}`,
    );
    await withinDeadline(edge.idle(), "the edge's builds and sweeps");
  };
  const held = async () => {
    const out: string[] = [];
    for (const name of ["x", "y", "z"]) {
      const key = `${dir.path}/store/${lfsObjectKey(oids[name])}`;
      if (await Deno.stat(key).then(() => true, () => false)) out.push(name);
    }
    return out;
  };
  try {
    await clone("x");
    offset += PAST_PINS_MS;
    // Each clone begins with a sweep: the object before, unpinned now, is over the cap alone.
    await clone("y");
    assertEquals(await held(), ["y"]);
    offset += PAST_PINS_MS;
    await clone("z");
    assertEquals(await held(), ["z"]);
    // A sweep now: z alone is over the cap, but its URL is valid: it stays.
    offset += NEXT_SWEEP_MS;
    await (await fetch(`${edge.url}/_edge/metrics`)).body?.cancel();
    await withinDeadline(edge.idle(), "the sweep");
    assertEquals(await held(), ["z"], "a pinned object stays over the cap");
    assert(logs.some((l) => l.includes("store.evict") && l.includes(oids.x)), "eviction logged");
    const metrics = await (await fetch(`${edge.url}/_edge/metrics`)).text();
    assert(/gitedge_store_lfs_objects 1\b/.test(metrics), metrics);
    assert(/gitedge_lfs_evictions_total 2\b/.test(metrics), metrics);
    // An evicted object is filled again from the origin at its next download.
    origin.resetStats();
    await clone("x");
    assertEquals(origin.stats.objectBytes, 100_000);
    // The store's totals are the operator's (docs/access.md): asked with the admin token.
    const page = await (await fetch(`${edge.url}/_edge/repos`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    })).json();
    assertEquals(page.lfs.misses, 4);
  } finally {
    await edge.stop();
  }
});
