/**
 * Incremental fetches through the edge: runners with yesterday's clone running `git fetch` after
 * the origin gained commits. Their fetches (wants, haves, no `done` when the origin is `ready` in
 * the first round) go through the response cache keyed by wants and haves
 * (src/proxy/core/response_cache.ts): runners in the same state make the origin compute one pack
 * between them, runners in other states get their own answers, and every fetch ends equal to a
 * direct one (refs, `fsck --full`). Stock git 2.39 and the current git, with and without
 * `fetch.uriProtocols`.
 */
import { git, tempDir } from "../support/git.ts";
import { type GitBuild, modernGit, systemGit } from "../support/git_builds.ts";
import { skipped } from "../support/skips.ts";
import { startOrigin } from "../support/origin.ts";
import { denoEdgeFactory } from "../support/edge.ts";
import { addCommits, assertSameClone, makeRepo, refsOf } from "../support/fixtures.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { encodePkts, PktLineReader } from "../../src/git/pktline.ts";

const modern = await modernGit();
if (typeof modern === "string") skipped("incremental fetches with the current git", modern);
const GITS: GitBuild[] = typeof modern === "string" ? [systemGit] : [systemGit, modern];

const URIS = ["-c", "fetch.uriProtocols=http"];
const RUNNERS = 10;

/** Response-cache hits so far, from the edge's metrics. */
async function cacheHits(edgeUrl: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return Number(/gitedge_response_cache_total\{result="hit"\} (\d+)/.exec(text)?.[1] ?? 0);
}

/** Copies the clone `from` to `to` as it is (the same refs, objects and config). */
async function copyClone(from: string, to: string): Promise<void> {
  const out = await new Deno.Command("cp", { args: ["-a", from, to] }).output();
  assert(out.success, `cp -a ${from} ${to}`);
}

for (const build of GITS) {
  Deno.test(`${build.label}: ${RUNNERS} runners with yesterday's clone fetch new commits at once: the origin computes one pack, each fetch equals a direct one`, async () => {
    await using origin = await startOrigin();
    const repo = await makeRepo(origin, "r.git", { commits: 8, tags: 2, binaryBytes: 200_000 });
    // No ls-refs sent ahead: the origin's ls-refs are then the runners' own listings, counted.
    await using edge = await denoEdgeFactory({ origin: origin.url, lsRefsAheadSeconds: 0 });
    await using dir = await tempDir();
    const d = dir.path;
    const run = (args: string[], cwd?: string) => git(args, { bin: build.bin, cwd });
    // Yesterday's clone, through the edge; its copies are the runners (the same haves).
    await run([...URIS, "clone", "-q", `${edge.url}/r.git`, `${d}/yesterday`]);
    await edge.settled("r.git", () => true);
    await copyClone(`${d}/yesterday`, `${d}/direct`);
    await run(["remote", "set-url", "origin", repo.url], `${d}/direct`);
    const runners = Array.from({ length: RUNNERS }, (_, i) => `${d}/runner-${i}`);
    for (const r of runners) await copyClone(`${d}/yesterday`, r);

    // Overnight: new commits on main, a new annotated tag on the tip (followed by the fetch).
    await addCommits(origin, "r.git", { commits: 20, tag: "nightly" });
    await run(["fetch", "-q"], `${d}/direct`);
    origin.stats.reset();
    // Half ask for packfile URIs: an incremental fetch gets none, and asks the same question.
    const fetches = await Promise.allSettled(
      runners.map((r, i) => run([...(i % 2 ? URIS : []), "fetch", "-q"], r)),
    );
    for (const f of fetches) if (f.status === "rejected") throw f.reason;
    assertEquals(origin.stats.commands.fetch, 1, "the origin computed one pack for all runners");
    // No tag listing keys an incremental fetch (keyedByTags): one ls-refs per runner, its own.
    assertEquals(origin.stats.commands["ls-refs"], RUNNERS, "the runners' own listings only");
    for (const r of runners) await assertSameClone(`${d}/direct`, r);
    assert((await refsOf(runners[0]))["refs/tags/nightly"], "the new tag came along");
  });
}

Deno.test("runners in other states (haves no other runner sent) get their own answers, each equal to a direct fetch", async () => {
  await using origin = await startOrigin();
  const repo = await makeRepo(origin, "r.git", { commits: 8, binaryBytes: 100_000 });
  await using edge = await denoEdgeFactory({ origin: origin.url });
  await using dir = await tempDir();
  const d = dir.path;
  // Two days ago and yesterday: the same wants tonight, different haves.
  await git(["clone", "-q", `${edge.url}/r.git`, `${d}/older`]);
  await addCommits(origin, "r.git", { commits: 6 });
  await git(["clone", "-q", `${edge.url}/r.git`, `${d}/newer`]);
  for (const name of ["older", "newer"]) {
    await copyClone(`${d}/${name}`, `${d}/${name}-direct`);
    await git(["remote", "set-url", "origin", repo.url], { cwd: `${d}/${name}-direct` });
  }
  await addCommits(origin, "r.git", { commits: 4 });
  origin.stats.reset();
  // The newer runner first: its answer lacks the commits the older one misses too. Were the
  // haves not in the key, the older runner would get it and end without them (fetch fails).
  for (const name of ["newer", "older"]) {
    await git(["fetch", "-q"], { cwd: `${d}/${name}` });
    await git(["fetch", "-q"], { cwd: `${d}/${name}-direct` });
    await assertSameClone(`${d}/${name}-direct`, `${d}/${name}`);
  }
  // Each runner's pack from the origin (and each direct fetch's).
  assertEquals(origin.stats.commands.fetch, 4);
});

Deno.test("a tag added after the answer was stored: the next runner gets the answer, then the tag, as a direct fetch does", async () => {
  await using origin = await startOrigin();
  const repo = await makeRepo(origin, "r.git", { commits: 8, tags: 1, binaryBytes: 100_000 });
  await using edge = await denoEdgeFactory({ origin: origin.url });
  await using dir = await tempDir();
  const d = dir.path;
  await git(["clone", "-q", `${edge.url}/r.git`, `${d}/yesterday`]);
  for (const name of ["first", "second", "direct"]) {
    await copyClone(`${d}/yesterday`, `${d}/${name}`);
  }
  await git(["remote", "set-url", "origin", repo.url], { cwd: `${d}/direct` });
  await addCommits(origin, "r.git", { commits: 5 });
  await git(["fetch", "-q"], { cwd: `${d}/first` });
  // A tag on a new commit that is no branch tip: the second runner's wants stay the first's (the
  // same key, the stored answer without the tag object); git then fetches the tag itself.
  await git(["tag", "-a", "-m", "late", "late", "main~2"], { cwd: repo.bare });
  const hits = await cacheHits(edge.url);
  await git(["fetch", "-q"], { cwd: `${d}/second` });
  assertEquals(await cacheHits(edge.url), hits + 1, "the stored answer, then the tag's own fetch");
  await git(["fetch", "-q"], { cwd: `${d}/direct` });
  await assertSameClone(`${d}/direct`, `${d}/second`);
  assert((await refsOf(`${d}/second`))["refs/tags/late"], "the late tag came");
  // A tag on the tip is wanted: a new key, the origin's answer (with the tag object).
  await git(["tag", "-a", "-m", "tip", "tip", "main"], { cwd: repo.bare });
  await addCommits(origin, "r.git", { commits: 1 });
  await git(["tag", "-a", "-m", "newest", "newest", "main"], { cwd: repo.bare });
  for (const name of ["second", "direct"]) await git(["fetch", "-q"], { cwd: `${d}/${name}` });
  await assertSameClone(`${d}/direct`, `${d}/second`);
});

/** The names of the sections of an upload-pack answer (`acknowledgments`, `packfile`). */
async function sectionsOf(res: Response): Promise<string[]> {
  assertEquals(res.status, 200);
  const reader = new PktLineReader(res.body!);
  const sections: string[] = [];
  let atStart = true;
  for (;;) {
    const pkt = await reader.read();
    if (pkt === null || pkt.type === "flush") break;
    if (pkt.type === "delim") {
      atStart = true;
      continue;
    }
    if (pkt.type !== "data") continue;
    if (atStart) sections.push(new TextDecoder().decode(pkt.data).trim());
    atStart = false;
    if (sections.at(-1) === "packfile") break;
  }
  await reader.cancel();
  return sections;
}

Deno.test("the same wants and haves with and without done get their own answers (acknowledgments only without)", async () => {
  await using origin = await startOrigin();
  const repo = await makeRepo(origin, "r.git", { commits: 8 });
  const old = repo.refs["refs/heads/main"];
  const { tip } = await addCommits(origin, "r.git", { commits: 3 });
  await using edge = await denoEdgeFactory({ origin: origin.url });
  const ask = async (done: boolean) => {
    const res = await fetch(`${edge.url}/r.git/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
      },
      body: encodePkts([
        "command=fetch\n",
        "delim",
        "ofs-delta\n",
        "no-progress\n",
        `want ${tip}\n`,
        `have ${old}\n`,
        ...(done ? ["done\n"] : []),
        "flush",
      ]) as Uint8Array<ArrayBuffer>,
    });
    return await sectionsOf(res);
  };
  // Credentials are memoised from an upload-pack answer: an ls-refs first, as git does.
  const lsRefs = await fetch(`${edge.url}/r.git/git-upload-pack`, {
    method: "POST",
    headers: { "git-protocol": "version=2" },
    body: encodePkts(["command=ls-refs\n", "delim", "flush"]) as Uint8Array<ArrayBuffer>,
  });
  await lsRefs.body?.cancel();
  origin.stats.reset();
  assertEquals(await ask(true), ["packfile"]);
  assertEquals(await ask(true), ["packfile"], "the same again");
  assertEquals(origin.stats.commands.fetch, 1, "the second was a hit");
  assertEquals(await ask(false), ["acknowledgments", "packfile"], "without done: ACKs, ready");
  assertEquals(await ask(false), ["acknowledgments", "packfile"], "the same again");
  assertEquals(origin.stats.commands.fetch, 2, "a miss, then a hit");
});

Deno.test("a private repository's stored incremental answer goes to no caller the origin refuses", async () => {
  await using origin = await startOrigin({ requireAuth: { user: "alice", password: "s3cret" } });
  const repo = await makeRepo(origin, "r.git", { commits: 8 });
  const old = repo.refs["refs/heads/main"];
  const { tip } = await addCommits(origin, "r.git", { commits: 3 });
  await using edge = await denoEdgeFactory({ origin: origin.url });
  const basic = (user: string, password: string) => `Basic ${btoa(`${user}:${password}`)}`;
  const post = (lines: string[], authorization?: string) =>
    fetch(`${edge.url}/r.git/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
        ...(authorization ? { authorization } : {}),
      },
      body: encodePkts(lines) as Uint8Array<ArrayBuffer>,
    });
  const lsRefs = ["command=ls-refs\n", "delim", "flush"];
  const fetchLines = [
    "command=fetch\n",
    "delim",
    "thin-pack\n",
    "ofs-delta\n",
    "include-tag\n",
    "no-progress\n",
    `want ${tip}\n`,
    `have ${old}\n`,
    "flush",
  ];
  const alice = basic("alice", "s3cret");
  await (await post(lsRefs, alice)).body?.cancel();
  assertEquals(await sectionsOf(await post(fetchLines, alice)), ["acknowledgments", "packfile"]);
  assertEquals(await sectionsOf(await post(fetchLines, alice)), ["acknowledgments", "packfile"]);
  assertEquals(origin.stats.commands.fetch, 1, "alice's second fetch was a hit");
  // The same request without credentials, and with a wrong password: the origin's refusal.
  for (const authorization of [undefined, basic("alice", "wrong"), basic("mallory", "s3cret")]) {
    const res = await post(fetchLines, authorization);
    const body = await res.text();
    assertEquals(res.status, 401, `${authorization ?? "no credentials"}: ${body.slice(0, 80)}`);
    assert(!body.includes("packfile"), "no stored answer");
  }
});

/** The object count in the pack header of an upload-pack answer (sideband, no sideband-all). */
async function packObjects(res: Response): Promise<number> {
  assertEquals(res.status, 200);
  const reader = new PktLineReader(res.body!);
  let inPack = false;
  try {
    for (;;) {
      const pkt = await reader.read();
      if (pkt === null || pkt.type === "flush") throw new Error("no pack header");
      if (pkt.type !== "data") continue;
      if (!inPack) {
        inPack = new TextDecoder().decode(pkt.data) === "packfile\n";
        continue;
      }
      // Band 1, "PACK", version, then the count (big-endian); git's first packet holds them.
      if (pkt.data[0] !== 1) continue;
      const header = pkt.data.subarray(1, 13);
      assertEquals(new TextDecoder().decode(header.subarray(0, 4)), "PACK");
      return new DataView(header.buffer, header.byteOffset).getUint32(8);
    }
  } finally {
    await reader.cancel();
  }
}

Deno.test("the same incremental fetch with and without include-tag get their own answers (the tag object only with)", async () => {
  await using origin = await startOrigin();
  const repo = await makeRepo(origin, "r.git", { commits: 8 });
  const old = repo.refs["refs/heads/main"];
  const { tip } = await addCommits(origin, "r.git", { commits: 3, tag: "on-tip" });
  await using edge = await denoEdgeFactory({ origin: origin.url });
  const post = (lines: string[]) =>
    fetch(`${edge.url}/r.git/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
      },
      body: encodePkts(lines) as Uint8Array<ArrayBuffer>,
    });
  await (await post(["command=ls-refs\n", "delim", "flush"])).body?.cancel();
  const ask = async (includeTag: boolean) =>
    await packObjects(
      await post([
        "command=fetch\n",
        "delim",
        "ofs-delta\n",
        "no-progress\n",
        ...(includeTag ? ["include-tag\n"] : []),
        `want ${tip}\n`,
        `have ${old}\n`,
        "done\n",
        "flush",
      ]),
    );
  const without = await ask(false);
  assertEquals(await ask(false), without, "a hit, the same");
  assertEquals(await ask(true), without + 1, "with include-tag: the tag object too");
  assertEquals(await ask(true), without + 1, "a hit, the same");
  assertEquals(origin.stats.commands.fetch, 2, "one miss each");
});
