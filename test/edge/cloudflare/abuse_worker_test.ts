/** Hostile traffic and faults against the Worker in workerd (`test/proxy/abuse_suite.ts`). */
import { abuseSuite } from "../../proxy/abuse_suite.ts";
import {
  MINIFLARE_LEAKS,
  startWorkerEdge,
  workerEdgeFactory,
} from "../../support/worker_harness.ts";
import { assert, assertEquals } from "../../support/assert.ts";

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
abuseSuite(workerEdgeFactory, "worker", MINIFLARE_LEAKS);

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test({
  name: "[worker] an ORIGIN with credentials is refused, and the refusal does not repeat them",
  ...MINIFLARE_LEAKS,
}, async () => {
  await using worker = await startWorkerEdge({
    config: { origin: "http://alice:s3cret@127.0.0.1:9" },
  });
  const res = await fetch(`${worker.url}/x.git/info/refs?service=git-upload-pack`);
  const text = await res.text();
  assertEquals(res.status, 500, text);
  assert(/ORIGIN must be a URL without credentials/.test(text), text);
  assert(!text.includes("s3cret") && !text.includes("alice"), text);
});
