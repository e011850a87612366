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
