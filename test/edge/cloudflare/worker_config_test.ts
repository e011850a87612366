/** The Worker in workerd refuses to serve with a misconfigured environment: a 500 that says why. */
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";
import { MINIFLARE_LEAKS, startWorker } from "../../support/worker_harness.ts";

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test({
  name: "[worker] a misconfigured environment is a 500 naming the variable",
  ...MINIFLARE_LEAKS,
}, async () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ EDGE_SIGNING_KEY: "ab".repeat(32) }, /ORIGIN|ALLOW_HOSTS/],
    [{ ORIGIN: "http://127.0.0.1:9", EDGE_SIGNING_KEY: "abcd" }, /EDGE_SIGNING_KEY/],
    [{ ORIGIN: "http://127.0.0.1:9" }, /EDGE_SIGNING_KEY/],
  ];
  for (const [bindings, names] of cases) {
    await using worker = await startWorker({
      entry: "edge/cloudflare/worker.ts",
      bindings,
      r2Buckets: ["PACKS"],
      durableObjects: { REPO_SNAPSHOTS: "RepoSnapshotsObject" },
    });
    const res = await fetch(`${worker.url}/x.git/info/refs?service=git-upload-pack`);
    const text = await res.text();
    assertEquals(res.status, 500, `${JSON.stringify(bindings)}: ${text}`);
    assertMatch(text, /^gitedge: misconfigured edge: /, text);
    assertMatch(text, names, text);
    assert(!text.includes("abcd"), `the key is not repeated: ${text}`);
  }
});
