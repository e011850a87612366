import { assert, assertEquals } from "../support/assert.ts";
import { formatBytes, ProgressView } from "../../src/client/progress_view.ts";

Deno.test("ProgressView shows packs done, totals and per-pack percentages on one line", () => {
  const writes: string[] = [];
  const view = new ProgressView({ write: (t) => writes.push(t), intervalMs: 0, width: () => 200 });
  const a = "a".repeat(40);
  const b = "b".repeat(40);
  view.phase("Receiving packfile URIs");
  view.packEvent({ type: "start", hash: a, bytes: 0 });
  view.packEvent({ type: "start", hash: b, bytes: 0 });
  view.packEvent({ type: "progress", hash: a, bytes: 512, total: 1024 });
  assert(writes.at(-1)!.includes("packs 0/2"), writes.at(-1));
  assert(writes.at(-1)!.includes("aaaaaaa 50%"), writes.at(-1));
  view.packEvent({ type: "done", hash: a, bytes: 1024, total: 1024, seconds: 1 });
  const line = writes.at(-1)!;
  assert(line.startsWith("\r\x1b[K"), JSON.stringify(line));
  assert(line.includes("packs 1/2") && line.includes("1.0 KiB"), line);
  assert(!line.includes("aaaaaaa"), "finished packs leave the in-flight list");
  view.finish();
  assertEquals(writes.at(-1), "\n");
});

Deno.test("formatBytes uses binary units", () => {
  assertEquals(formatBytes(512), "512 B");
  assertEquals(formatBytes(1536), "1.5 KiB");
  assertEquals(formatBytes(3 * 1024 * 1024), "3.0 MiB");
});

Deno.test("ProgressView's rate holds still once bytes stop (indexing, checkout) and it shows object counts", () => {
  const writes: string[] = [];
  let now = 1000;
  const view = new ProgressView({
    write: (t) => writes.push(t),
    intervalMs: 0,
    width: () => 200,
    now: () => now,
  });
  const a = "a".repeat(40);
  view.phase("Receiving packfile URIs");
  view.packEvent({ type: "start", hash: a, bytes: 0 });
  now += 1000;
  view.packEvent({ type: "progress", hash: a, bytes: 1 << 20, total: 2 << 20 });
  now += 1000;
  view.packEvent({ type: "progress", hash: a, bytes: 2 << 20, total: 2 << 20 });
  assert(writes.at(-1)!.includes("2.0 MiB, 1.0 MiB/s"), writes.at(-1));
  // Ten seconds of indexing and checkout: no new bytes, the same rate.
  view.objects(a, { objects: 500, objectsTotal: 1000, deltas: 0, deltasTotal: 0 });
  now += 5000;
  view.objects("inline", { objects: 10, objectsTotal: 10, deltas: 3, deltasTotal: 4 });
  assert(writes.at(-1)!.includes("objects 510/1010, deltas 3/4"), writes.at(-1));
  now += 5000;
  view.phase("Checking out");
  assert(writes.at(-1)!.includes("2.0 MiB, 1.0 MiB/s"), writes.at(-1));
});
