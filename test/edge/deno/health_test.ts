/**
 * Health on the Deno server (src/proxy/ops/health.ts): liveness and readiness answer without the
 * origin and without credentials; readiness is 503 while the store takes no write and while the
 * edge drains.
 */
import { assertEquals } from "../../support/assert.ts";
import { tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { STORE_PROBE_TTL } from "../../../src/proxy/ops/health.ts";
import { createLogger } from "../../../src/proxy/core/log.ts";

async function get(url: string, method = "GET") {
  // A new connection for each request: a drain tells connections opened before it from later ones.
  using client = Deno.createHttpClient({ poolMaxIdlePerHost: 0 });
  const res = await fetch(url, { method, client });
  const text = await res.text();
  if (!(res.headers.get("content-type") ?? "").includes("json")) return { status: res.status };
  return {
    status: res.status,
    body: text ? JSON.parse(text) : null,
    cache: res.headers.get("cache-control"),
  };
}

Deno.test("health: live and ready answer 200 without the origin or a token; ready is 503 while the store takes no write", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  const store = `${dir.path}/store`;
  const lines: string[] = [];
  await using edge = await startDenoEdge({
    store,
    config: { origin: origin.url, adminToken: "admin-secret" },
    log: createLogger({ level: "info", write: (line) => lines.push(line) }),
  });
  // A file where the probe's folder goes: the store refuses that write (even to root).
  await Deno.writeTextFile(`${store}/health`, "in the way");
  const broken = await get(`${edge.url}/_edge/health/ready`);
  assertEquals(broken.status, 503);
  assertEquals(broken.body, {
    status: "not ready",
    checks: { draining: "ok", store: "not writable", signingKey: "ok" },
  });
  assertEquals(await get(`${edge.url}/_edge/health/live`), {
    status: 200,
    body: { status: "live" },
    cache: "no-store",
  });
  await Deno.remove(`${store}/health`);
  await new Promise((r) => setTimeout(r, STORE_PROBE_TTL.failMs + 100));
  assertEquals(await get(`${edge.url}/_edge/health/ready`), {
    status: 200,
    body: { status: "ready", checks: { draining: "ok", store: "ok", signingKey: "ok" } },
    cache: "no-store",
  });
  assertEquals((await get(`${edge.url}/_edge/health/ready`, "HEAD")).status, 200);
  assertEquals(origin.stats.requests, 0, "health never asks the origin");
  // Probes come every few seconds: their request records are debug, below the default level.
  const records = lines.map((line) => JSON.parse(line));
  assertEquals(records.filter((r) => r.event === "request"), []);
  assertEquals(records.filter((r) => r.event === "store.unwritable").length, 1, lines.join("\n"));
});

Deno.test("health: ready is 503 while the edge drains; a connection opened then gets nothing but health and packs", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url },
  });
  assertEquals((await get(`${edge.url}/_edge/health/ready`)).status, 200);
  const drained = edge.drain({ timeoutMs: 10_000, quietMs: 1500 });
  const ready = await get(`${edge.url}/_edge/health/ready`);
  assertEquals(ready.status, 503);
  assertEquals(ready.body.checks.draining, "draining");
  assertEquals((await get(`${edge.url}/_edge/health/live`)).status, 200);
  const git = await get(`${edge.url}/r.git/info/refs?service=git-upload-pack`).catch((e) => e);
  assertEquals(git.status, 503, "no new clone during the drain");
  const report = await drained;
  assertEquals([report.cutConnections, report.cutRequests], [0, 0]);
  assertEquals(origin.stats.requests, 0);
});
