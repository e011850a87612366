/**
 * The operator's page tells the truth (issue #34): origin bytes saved count every path that spares
 * the origin (a pack by URI, a plain clone streamed from the snapshot, a bundle, a response-cache
 * hit), the store card shows the whole store by kind (the response cache included), the last build
 * is the last one that built (not a no-op warm), and a browser logs in with the admin token
 * (Basic, the token as password), read in headless chromium; Basic never authorises a warm.
 */
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { startOrigin } from "../../support/origin.ts";
import { makeRepo } from "../../support/fixtures.ts";
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { URI_CLONE } from "../../proxy/edge_suite.ts";
import { chromiumMissing, dumpDom } from "../../support/chromium.ts";

const TOKEN = "operator-token-0123456789";
const BEARER = { authorization: `Bearer ${TOKEN}` };
const BASIC = { authorization: `Basic ${btoa(`admin:${TOKEN}`)}` };

/** `gitedge_origin_bytes_saved_total` by path, from `/_edge/metrics`. */
async function savedByPath(edgeUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`, { headers: BEARER })).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^gitedge_origin_bytes_saved_total\{path="([^"]+)"\} (\d+)/gm)) {
    out[m[1]] = Number(m[2]);
  }
  return out;
}

interface RepoRow {
  path: string;
  originBytesSaved: number;
  lastBuild: { startedAt: string; durationSeconds: number } | null;
}

async function overview(edgeUrl: string, headers: Record<string, string>) {
  const res = await fetch(`${edgeUrl}/_edge/repos`, { headers });
  assertEquals(res.status, 200);
  return await res.json() as {
    store: { bytes: number; totalBytes: number; byKind: Record<string, number> };
    totals: { originBytesSaved: number };
    repositories: RepoRow[];
  };
}

Deno.test("[deno] operator page: bytes saved by every path, the store by kind, the last real build, a browser login", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await makeRepo(origin, "team/app.git", { commits: 8, binaryBytes: 100_000 });
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url, chunks: 2, adminToken: TOKEN },
    onBuildError: () => {},
  });
  const warmed = await fetch(`${edge.url}/_edge/warm/team/app.git`, {
    method: "POST",
    headers: BEARER,
  });
  assertEquals(warmed.status, 200);
  // (The status route, not the page: the page's store figure is measured at most every 30 s.)
  const built = (await warmed.json()).snapshot.lastBuild;
  assert(built?.finishedAt, "the warm built");

  // A plain clone (no packfile URIs): streamed from the snapshot.
  await git(["clone", "-q", "--bare", `${edge.url}/team/app.git`, `${dir.path}/plain.git`]);
  // A clone by URI.
  await git([...URI_CLONE, "--bare", `${edge.url}/team/app.git`, `${dir.path}/uri.git`]);
  // Two shallow clones: the second from the response cache.
  for (const name of ["s1", "s2"]) {
    await git(["clone", "-q", "--depth", "1", `${edge.url}/team/app.git`, `${dir.path}/${name}`]);
  }
  await edge.idle();
  const saved = await savedByPath(edge.url);
  for (const path of ["stream", "uri", "response-cache"]) {
    assert((saved[path] ?? 0) > 0, `bytes saved by ${path}: ${JSON.stringify(saved)}`);
  }
  const o = await overview(edge.url, BEARER);
  const sum = Object.values(saved).reduce((a, b) => a + b, 0);
  assertEquals(o.repositories[0].originBytesSaved, sum, "the page counts every path");
  assertEquals(o.totals.originBytesSaved, sum);
  // The whole store, by kind: the response cache is in it, beside the snapshots the cap counts.
  assert(o.store.byKind["response-cache"] > 0, JSON.stringify(o.store));
  assert(o.store.byKind.packs > 0, JSON.stringify(o.store));
  assertEquals(
    o.store.totalBytes,
    Object.values(o.store.byKind).reduce((a, b) => a + b, 0),
  );
  assert(o.store.totalBytes > o.store.bytes, "more than the snapshots");

  // A warm with nothing new keeps the last build the one that built.
  const noop = await fetch(`${edge.url}/_edge/warm/team/app.git`, {
    method: "POST",
    headers: BEARER,
  });
  assertEquals(noop.status, 200, await noop.text());
  const last = (await overview(edge.url, BEARER)).repositories[0].lastBuild!;
  assertEquals([last.startedAt, last.durationSeconds], [built.startedAt, built.durationSeconds]);

  // Login: Basic with the token as password reads the page and the JSON; a browser is challenged
  // for it; Basic never authorises a warm (a browser would send it cross-site).
  const refused = await fetch(`${edge.url}/_edge/`);
  await refused.body?.cancel();
  assertEquals(refused.status, 401);
  assertMatch(refused.headers.get("www-authenticate") ?? "", /^Basic realm=/);
  await overview(edge.url, BASIC);
  const wrong = await fetch(`${edge.url}/_edge/repos`, {
    headers: { authorization: `Basic ${btoa(`admin:${TOKEN}x`)}` },
  });
  await wrong.body?.cancel();
  assertEquals(wrong.status, 401);
  const warmByBasic = await fetch(`${edge.url}/_edge/warm/team/app.git`, {
    method: "POST",
    headers: BASIC,
  });
  await warmByBasic.body?.cancel();
  assertEquals(warmByBasic.status, 401, "a warm takes the Bearer form only");

  const noChromium = await chromiumMissing();
  if (noChromium) {
    console.warn(`operator truth: skipping the browser login: ${noChromium}`);
    return;
  }
  const url = new URL(`${edge.url}/_edge/`);
  url.username = "admin";
  url.password = TOKEN;
  const dom = await dumpDom(url.href);
  assertMatch(dom, /<td class="path">team\/app\.git<\/td>/);
  assertMatch(dom, /response cache/);
});
