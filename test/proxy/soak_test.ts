/**
 * The soak, short: 16 clones of every kind through a real `gitedge serve` process, the origin
 * pushing meanwhile and one edge restart in the middle. Any failure other than a clone cut by the
 * restart (which must then succeed on retry) fails the test; every finished clone is fsck clean
 * with refs the origin had at its start or later. `bench/soak.ts` runs 200.
 */
import { assertEquals } from "../support/assert.ts";
import { formatSoak, runSoak, SOAK_KINDS } from "../support/soak.ts";

Deno.test("soak: 16 clones (cold, warm, shallow, blob:none, fetch) with pushes and an edge restart: no failure but cuts, all retried, all fsck clean", async () => {
  const report = await runSoak({
    clones: 16,
    concurrency: 4,
    pushEvery: 3,
    commits: 12,
    binaryBytes: 300_000,
  });
  const text = formatSoak(report);
  assertEquals(report.failures, [], text);
  assertEquals(report.restarts, 1, text);
  for (const kind of SOAK_KINDS) {
    const want = Math.floor(16 / SOAK_KINDS.length) +
      (SOAK_KINDS.indexOf(kind) < 16 % SOAK_KINDS.length ? 1 : 0);
    assertEquals(report.byKind[kind], want, `finished ${kind} clones\n${text}`);
  }
  assertEquals(report.fsckChecked, 16, text);
  assertEquals(report.pushes > 0, true, text);
});
