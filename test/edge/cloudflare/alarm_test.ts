/**
 * The Durable Object's refresh alarm, fired by workerd itself: after a credential-free warm, the
 * origin moves on, and the alarm (not a request) refreshes the snapshot.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { addCommits, makeRepo } from "../../support/fixtures.ts";
import { startOrigin } from "../../support/origin.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { MINIFLARE_LEAKS, startWorker, workerVars } from "../../support/worker_harness.ts";

async function status(url: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/_edge/status/r.git`);
  const body = await res.json();
  assertEquals(res.status, 200, JSON.stringify(body));
  return body.snapshot;
}

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test({
  name: "[worker] the refresh alarm rebuilds a moved snapshot in workerd",
  ...MINIFLARE_LEAKS,
}, async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 6 });
  await using worker = await startWorker({
    entry: "test/edge/cloudflare/alarm_worker.ts",
    bindings: { ...workerVars({ origin: origin.url, chunks: 2 }), REFRESH_SECONDS: "60" },
    r2Buckets: ["PACKS"],
    durableObjects: { REPO_SNAPSHOTS: "SoonAlarmSnapshots" },
  });
  const warmed = await fetch(`${worker.url}/_edge/warm/r.git`, { method: "POST" });
  const first = (await warmed.json()).snapshot;
  assertEquals(warmed.status, 200, JSON.stringify(first));
  assertEquals(first.builds, 1, "one build by the warm");

  // Reset first: an alarm may fetch as soon as the commits land, and its fetch must count.
  origin.stats.reset();
  const moved = await addCommits(origin, "r.git", { commits: 2 });
  // Nothing but the alarm can notice: no request reaches the edge except these status reads,
  // which workerd cannot be watched without (the alarm runs inside it).
  const refreshed = await withinDeadline(
    (async () => {
      for (let wait = 20;; wait = Math.min(wait * 2, 250)) {
        const st = await status(worker.url);
        if ((st.tips as string[]).includes(moved.tip)) return st;
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    })(),
    "the alarm's refresh",
  );
  assert((refreshed.builds as number) >= 2, `rebuilt by the alarm: ${refreshed.builds}`);
  assertEquals(refreshed.lastError, null);
  assert(origin.stats.commands.fetch >= 1, "the alarm fetched from the origin");
});
