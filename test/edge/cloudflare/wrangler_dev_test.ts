/**
 * The local Workers path of docs/workers.md: `deno task worker:dev` (the pinned `wrangler dev`, the signing
 * key in `.dev.vars`, `--var ORIGIN:`) in front of a real `git http-backend` origin. A warm must not
 * cost wrangler's node process a loopback connection per few KiB of the origin's pack: with
 * wrangler's DevTools inspector proxy on (the bare CLI), this 8 MiB repository alone left ~2,000
 * connections from workerd to node open (git.git's history: 20,000, and the warm failed). The
 * scale run is `bench/wrangler_dev.ts`.
 *
 * Needs `npx` and the npm registry (or npm's cache) for the pinned wrangler, like `worker:check`.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { git, spawnGit, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { startWranglerDev, type WranglerDevSample } from "../../support/wrangler_dev.ts";

/** Connections from workerd to node's loopback at rest (wrangler's own control channels). */
const AT_REST = 16;

Deno.test("wrangler dev as docs/workers.md runs it warms and serves without piling up loopback connections", async () => {
  await using origin = await startOrigin();
  await using work = await tempDir("gitedge-wrangler-test-");
  await makeRepo(origin, "repo.git", { commits: 40, targetBytes: 8 << 20, seed: 21 });
  await Deno.mkdir(`${work.path}/dev`);
  await using dev = await startWranglerDev({
    mode: "task",
    origin: origin.url,
    dir: `${work.path}/dev`,
  });

  let peak: WranglerDevSample = await dev.sample();
  const look = async () => {
    const s = await dev.sample();
    if (s.toNodeTotal > peak.toNodeTotal) peak = s;
  };
  const timer = setInterval(() => void look().catch(() => {}), 250);
  try {
    const res = await withinDeadline(
      fetch(`${dev.url}/_edge/warm/repo.git`, { method: "POST" }),
      "warm through wrangler dev",
      120_000,
    );
    const body = await res.json();
    assertEquals(res.status, 200, JSON.stringify(body));
    assertEquals(body.snapshot.state, "ready", JSON.stringify(body));
  } finally {
    clearInterval(timer);
  }
  await look();
  assert(
    peak.toNodeTotal <= AT_REST,
    `workerd held ${peak.toNodeTotal} connections to wrangler's node process while warming ` +
      `(${
        JSON.stringify(peak.toNode)
      }; descriptors front ${peak.front.fds}, worker ${peak.worker.fds})`,
  );

  // And stock git clones it by URI from wrangler dev, the same as from the origin.
  const dest = `${work.path}/clone`;
  const child = spawnGit(
    ["-c", "fetch.uriProtocols=http", "clone", "-q", `${dev.url}/repo.git`, dest],
    { env: { GIT_TRACE: "1" }, stdout: "null" },
  );
  const out = await withinDeadline(child.output(), "clone through wrangler dev", 120_000);
  const trace = new TextDecoder().decode(out.stderr);
  assert(out.success, `clone through wrangler dev failed:\n${trace.slice(-2000)}`);
  assert(trace.includes("run_command: git http-fetch "), "the clone fetched no pack by URI");
  await git(["clone", "-q", origin.repoUrl("repo.git"), `${work.path}/direct`]);
  await assertSameClone(`${work.path}/direct`, dest);
});
