/**
 * Paths the origin does not serve (issue #35 case 11): fetches and bundle lists of random paths
 * leave no per-repository state behind in the edge.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { startOrigin } from "../../support/origin.ts";
import { makeRepo } from "../../support/fixtures.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { encodePkts } from "../../../src/git/pktline.ts";
import type { InProcessCoordinator } from "../../../src/proxy/snapshots/in_process_coordinator.ts";

Deno.test("random paths: fetches and bundle lists of repositories the origin does not serve hold no state", async () => {
  // Fails on the coordinator that kept a RepoSnapshots per path ever asked (120 here, 60,000
  // fetches held 185 MiB until restart).
  await using origin = await startOrigin();
  const { refs } = await makeRepo(origin, "r.git", { commits: 2, branches: 0, tags: 0 });
  const store = await Deno.makeTempDir({ prefix: "gitedge-store-" });
  const edge = await startDenoEdge({
    store,
    port: 0,
    config: { origin: origin.url },
    onBuildError: () => {},
  });
  try {
    const fetchBody = encodePkts([
      "command=fetch\n",
      "delim",
      `want ${refs["refs/heads/main"]}\n`,
      "done\n",
      "flush",
    ]) as Uint8Array<ArrayBuffer>;
    const N = 60;
    for (let i = 0; i < N; i++) {
      const path = `rand-${crypto.randomUUID()}.git`;
      const [a, b] = await Promise.all([
        fetch(`${edge.url}/${path}/git-upload-pack`, {
          method: "POST",
          headers: {
            "git-protocol": "version=2",
            "content-type": "application/x-git-upload-pack-request",
          },
          body: fetchBody,
        }),
        fetch(`${edge.url}/_edge/bundle-list/${path}`),
      ]);
      await a.body?.cancel();
      await b.body?.cancel();
      assert(a.status >= 400 && b.status >= 400, `${a.status} ${b.status}`);
    }
    await edge.idle();
    assertEquals((edge.coordinator as InProcessCoordinator).size, 0, "no repository state held");
  } finally {
    await edge.stop();
    await Deno.remove(store, { recursive: true }).catch(() => {});
  }
});
