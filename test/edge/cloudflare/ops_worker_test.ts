/**
 * The Worker's health endpoints and log in workerd (src/proxy/ops/health.ts, src/proxy/core/log.ts):
 * liveness and readiness without the origin, readiness 503 without a signing key; a JSON record
 * per request through `console` with the Deno server's fields, build records from the Durable
 * Object, and no secret in any line.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { URI_CLONE } from "../../proxy/edge_suite.ts";
import { MINIFLARE_LEAKS, startWorkerEdge } from "../../support/worker_harness.ts";

async function json(url: string, init?: RequestInit): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, init);
  return { status: res.status, body: await res.json() };
}

/** Waits until `lines` holds a record `match` accepts (the Durable Object logs in the background). */
async function eventually(
  lines: string[],
  match: (r: Record<string, unknown>) => boolean,
  what: string,
): Promise<Record<string, unknown>> {
  for (let i = 0; i < 200; i++) {
    const found = records(lines).find(match);
    if (found) return found;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no ${what} in the Worker's log:\n${lines.join("\n")}`);
}

function records(lines: string[]): Record<string, unknown>[] {
  return lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
}

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test({ name: "Worker: health and the log", ...MINIFLARE_LEAKS }, async (t) => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 6, binaryBytes: 100_000 });
  await using dir = await tempDir();
  const lines: string[] = [];
  const key = crypto.getRandomValues(new Uint8Array(32));
  const keyHex = Array.from(key, (b) => b.toString(16).padStart(2, "0")).join("");
  await using worker = await startWorkerEdge({
    config: { origin: origin.url, adminToken: "worker-admin-secret" },
    signingKey: key,
    onLog: (log) => lines.push(log.message),
  });

  await t.step("live and ready answer 200, unauthenticated, without the origin", async () => {
    const before = origin.stats.requests;
    assertEquals(await json(`${worker.url}/_edge/health/live`), {
      status: 200,
      body: { status: "live" },
    });
    assertEquals(await json(`${worker.url}/_edge/health/ready`), {
      status: 200,
      body: { status: "ready", checks: { draining: "ok", store: "ok", signingKey: "ok" } },
    });
    assertEquals(origin.stats.requests, before, "health never asks the origin");
  });

  await t.step("a clone logs a JSON record per request, and the build its steps", async () => {
    const warm = await fetch(`${worker.url}/_edge/warm/r.git`, {
      method: "POST",
      headers: { authorization: "Bearer worker-admin-secret" },
    });
    assertEquals(warm.status, 200, await warm.text());
    await git([...URI_CLONE, "--bare", `${worker.url}/r.git`, `${dir.path}/clone.git`]);
    await git(["clone", "-q", "--bare", `${origin.url}/r.git`, `${dir.path}/direct.git`]);
    await assertSameClone(`${dir.path}/clone.git`, `${dir.path}/direct.git`);
    const fetchRecord = await eventually(
      lines,
      (r) => r.event === "request" && r.route === "git-upload-pack" && r.action === "answered",
      "answered fetch",
    );
    assertEquals(fetchRecord.repo, "r.git");
    assertEquals(fetchRecord.status, 200);
    assertEquals(fetchRecord.method, "POST");
    assert(typeof fetchRecord.durationMs === "number" && typeof fetchRecord.bytes === "number");
    assert(typeof fetchRecord.time === "string" && !isNaN(Date.parse(fetchRecord.time as string)));
    assert((fetchRecord.packUris as number) > 0, JSON.stringify(fetchRecord));
    await eventually(lines, (r) => r.event === "request" && r.route === "pack", "pack download");
    await eventually(lines, (r) => r.event === "build.start" && r.repo === "r.git", "build.start");
    await eventually(lines, (r) => r.event === "build.step" && r.step === "fetch", "fetch step");
    const finish = await eventually(lines, (r) => r.event === "build.finish", "build.finish");
    assert((finish.packs as number) > 0 && (finish.bytes as number) > 0, JSON.stringify(finish));
  });

  await t.step("no secret in any line", () => {
    const all = lines.join("\n");
    assert(lines.length > 5, `${lines.length} lines`);
    for (const secret of [keyHex, "worker-admin-secret"]) {
      assert(!all.includes(secret), "a secret in the Worker's log");
    }
  });

  await t.step("without a signing key: live 200, ready 503", async () => {
    await using keyless = await startWorkerEdge({
      config: { origin: origin.url },
      vars: { EDGE_SIGNING_KEY: "" },
    });
    assertEquals((await json(`${keyless.url}/_edge/health/live`)).status, 200);
    assertEquals(await json(`${keyless.url}/_edge/health/ready`), {
      status: 503,
      body: {
        status: "not ready",
        checks: { settings: "misconfigured", signingKey: "not loaded" },
      },
    });
  });
});
