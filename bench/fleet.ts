/**
 * Clone storms against a fleet of 1 and of 3 Deno edges on one S3 store (`s3rver`, an S3
 * emulator from npm, so store latency is a loopback's, not S3's) with redis-server as
 * coordinator, behind a round-robin front. Per fleet size: a cold storm (the repository never
 * seen) then a warm one, each of `--clones` concurrent stock git clones with packfile URIs.
 * Figures: origin `fetch` commands (each makes the origin compute a pack), snapshots published
 * fleet-wide (builds), p50/p99 time to first byte of the clones' `fetch` answers (measured at a
 * timing proxy in front of the fleet), S3 requests per clone, storm wall time.
 *
 *   deno run -A bench/fleet.ts [--clones 30] [--quick]
 */
import { git, tempDir } from "../test/support/git.ts";
import { startOrigin } from "../test/support/origin.ts";
import { makeRepo } from "../test/support/fixtures.ts";
import { startFleet } from "../test/support/fleet.ts";
import { URI_CLONE } from "../test/support/traced_git.ts";
import { modernGit } from "../test/support/git_builds.ts";
import { repoId } from "../src/proxy/core/repo.ts";
import { flags, loadavg, median } from "./harness/mod.ts";

const quick = flags.has("quick");
const clones = flags.number("clones", quick ? 12 : 30);
const SPEC = quick
  ? { commits: 20, branches: 2, tags: 2, binaryBytes: 500_000, deltaFileRevisions: 4 }
  : { commits: 60, branches: 3, tags: 4, binaryBytes: 3_000_000, deltaFileRevisions: 8 };
const REPO = "team/bench.git";

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

/** A pass-through proxy timing each `command=fetch` POST to its answer's first byte. */
function timingProxy(target: () => string) {
  const ttfb: number[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const body = req.method === "POST" ? new Uint8Array(await req.arrayBuffer()) : null;
    const isFetch = body !== null && new TextDecoder().decode(body).includes("command=fetch");
    const headers = new Headers(req.headers);
    headers.delete("host");
    const started = performance.now();
    const res = await fetch(`${target()}${url.pathname}${url.search}`, {
      method: req.method,
      headers,
      body,
    });
    if (!isFetch || !res.body) return res;
    const reader = res.body.getReader();
    const first = await reader.read();
    ttfb.push(performance.now() - started);
    const rest = new ReadableStream<Uint8Array>({
      start(c) {
        if (!first.done) c.enqueue(first.value);
        else c.close();
      },
      async pull(c) {
        const r = await reader.read();
        if (r.done) c.close();
        else c.enqueue(r.value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(first.done ? null : rest, { status: res.status, headers: res.headers });
  });
  const addr = server.addr as Deno.NetAddr;
  return { url: `http://127.0.0.1:${addr.port}`, ttfb, stop: () => server.shutdown() };
}

const modern = await modernGit();
const bin = typeof modern === "string" ? "git" : modern.bin;
console.log(`fleet bench: ${clones} clones per storm, load ${loadavg()}`);
const rows: string[][] = [];
for (const nodes of [1, 3]) {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await makeRepo(origin, REPO, SPEC);
  let storeRequests = 0;
  await using fleet = await startFleet(nodes, {
    origin: origin.url,
    chunks: 3,
    leaseMs: 30_000,
    onStoreRequest: () => storeRequests++,
  });
  const proxy = timingProxy(() => fleet.front.url);
  try {
    for (const phase of ["cold", "warm"]) {
      origin.stats.reset();
      storeRequests = 0;
      proxy.ttfb.length = 0;
      const started = performance.now();
      await Promise.all(
        Array.from(
          { length: clones },
          (_, i) =>
            git([...URI_CLONE, "--mirror", `${proxy.url}/${REPO}`, `${dir.path}/${phase}${i}`], {
              bin,
            }),
        ),
      );
      const wall = performance.now() - started;
      await fleet.idle();
      rows.push([
        String(nodes),
        phase,
        String(origin.stats.commands.fetch ?? 0),
        String(await fleet.published(repoId(`${origin.url}/${REPO}`))),
        percentile(proxy.ttfb, 50).toFixed(0),
        percentile(proxy.ttfb, 99).toFixed(0),
        (storeRequests / clones).toFixed(1),
        (wall / 1000).toFixed(1),
      ]);
    }
  } finally {
    await proxy.stop();
  }
}
const header = [
  "nodes",
  "storm",
  "origin packs",
  "builds (published)",
  "TTFB p50 ms",
  "TTFB p99 ms",
  "S3 requests/clone",
  "wall s",
];
console.log(`| ${header.join(" | ")} |`);
console.log(`|${header.map(() => " --- ").join("|")}|`);
for (const r of rows) console.log(`| ${r.join(" | ")} |`);
console.log(`median TTFB p50 across rows: ${median(rows.map((r) => Number(r[4]))).toFixed(0)} ms`);
