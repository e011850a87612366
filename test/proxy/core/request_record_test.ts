import { Metrics } from "../../../src/proxy/core/metrics.ts";
import { recordOutcome, type RequestRecord } from "../../../src/proxy/core/request_record.ts";
import { assertEquals, assertMatch } from "../../support/assert.ts";

Deno.test("an outcome is written once: into the counters and the request's record", async () => {
  const metrics = new Metrics();
  const record: RequestRecord = {};
  const ctx = { metrics, record };
  recordOutcome(ctx, { action: "no-uris", reason: "shallow" });
  recordOutcome(ctx, { action: "cache-miss" });
  assertEquals(record, { action: "passthrough", reason: "shallow", cache: "miss" }, "miss after");
  recordOutcome(ctx, { action: "cache-hit" });
  assertEquals([record.action, record.cache], ["cache-hit", "hit"], "a hit is the answer");
  const uris = { metrics, record: {} as RequestRecord };
  recordOutcome(uris, { action: "rewrote", packUris: 3 });
  assertEquals(uris.record, { action: "rewrote", packUris: 3 });
  recordOutcome({ metrics }, { action: "answered", packUris: 2 });
  recordOutcome({ metrics }, { action: "pack", bytes: 10 });
  const text = await metrics.renderAll();
  for (
    const line of [
      /^gitedge_fetch_passthrough_total\{reason="shallow"\} 1$/m,
      /^gitedge_response_cache_total\{result="miss"\} 1$/m,
      /^gitedge_response_cache_total\{result="hit"\} 1$/m,
      /^gitedge_fetch_rewrites_total 1$/m,
      /^gitedge_fetch_answered_total 1$/m,
      /^gitedge_packfile_uris_total 5$/m,
      /^gitedge_cache_bytes_total 10$/m,
    ]
  ) assertMatch(text, line);
});
