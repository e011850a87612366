/**
 * The cache oracle (issue #35, failure 4), measured: an unauthorised replay of a wants/haves state
 * that is in the response cache vs one never fetched, against a private `git http-backend` origin
 * through the Deno edge: origin calls and wall time of each replay (medians, interleaved).
 *
 *   deno run -A bench/access_oracle.ts [--rounds 40]
 */
import { startOrigin } from "../test/support/origin.ts";
import { makeRepo } from "../test/support/fixtures.ts";
import { denoEdgeFactory } from "../test/support/edge.ts";
import { git } from "../test/support/git.ts";
import { encodePkts } from "../src/git/pktline.ts";

const rounds = Number(Deno.args[Deno.args.indexOf("--rounds") + 1]) || 40;
const ALICE = { user: "alice", password: "pw1" };
await using origin = await startOrigin({ requireAuth: ALICE });
await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
const { bare } = await makeRepo(origin, "r.git", { commits: 8 });
const commits = (await git(["rev-list", "main"], { cwd: bare })).trim().split("\n");
const url = `${edge.url}/r.git/git-upload-pack`;
const alice = `Basic ${btoa("alice:pw1")}`;
const body = (want: string, have: string) =>
  encodePkts([
    "command=fetch\n",
    "agent=git/2.39.5\n",
    "delim",
    "ofs-delta\n",
    "no-progress\n",
    `want ${want}\n`,
    `have ${have}\n`,
    "done\n",
    "flush",
  ]) as Uint8Array<ArrayBuffer>;
const post = async (b: Uint8Array<ArrayBuffer>, headers: Record<string, string> = {}) => {
  const res = await fetch(url, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
      ...headers,
    },
    body: b,
  });
  await res.arrayBuffer();
  return res.status;
};
const cachedState = body(commits[0], commits[3]);
// Alice fetches that state until her fetch is a hit: it is in the response cache.
const hits = async () => {
  const text = await (await fetch(`${edge.url}/_edge/metrics`)).text();
  const line = text.split("\n").find((l) =>
    l.startsWith('gitedge_response_cache_total{result="hit"} ')
  );
  return Number(line?.split(" ")[1] ?? 0);
};
for (let i = 0; i < 100 && await hits() === 0; i++) {
  const status = await post(cachedState, { authorization: alice });
  if (status !== 200) throw new Error(`alice's fetch: ${status}`);
  await new Promise((r) => setTimeout(r, 100));
}
if (await hits() === 0) throw new Error("alice's state never reached the cache");
const samples = { cached: [] as number[], never: [] as number[] };
const calls = { cached: [] as number[], never: [] as number[] };
for (let i = 0; i < rounds; i++) {
  for (const kind of ["cached", "never"] as const) {
    const b = kind === "cached" ? cachedState : body(commits[0], commits[4 + (i % 3)]);
    origin.stats.reset();
    const t0 = performance.now();
    const status = await post(b);
    samples[kind].push(performance.now() - t0);
    calls[kind].push(origin.stats.requests);
    if (status !== 401) throw new Error(`expected 401, got ${status}`);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const kind of ["cached", "never"] as const) {
  console.log(
    `${kind}: origin calls ${[...new Set(calls[kind])].join("/")}, median ${
      median(samples[kind]).toFixed(2)
    } ms (${rounds} replays)`,
  );
}
console.log(`ratio cached/never: ${(median(samples.cached) / median(samples.never)).toFixed(3)}`);
