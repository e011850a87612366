/**
 * Warm clones by every way the edge serves one, side by side in one run (issue #25): per
 * repository, bare clones by
 *   (a) packfile URIs: stock git with `-c fetch.uriProtocols=http` (the packs by URI, the rest
 *       inline);
 *   (b) bundle URIs: git 2.55 with `-c transfer.bundleURI=true` (one bundle per snapshot layer,
 *       then a small fetch);
 *   (c) a plain clone (no URIs, no bundles: every CI image's default) from a warm edge: streamed
 *       from the snapshot where the edge has `--snapshot-plain-clones` (on by default), otherwise
 *       from its response cache;
 *   (d) a plain clone from the response cache: a second edge with `--snapshot-plain-clones=false`
 *       where the edge has that flag, and a response-cache budget the answer fits in (an answer
 *       is cached up to a quarter of the budget: with the default 1 GiB, a 402 MB answer is not);
 *       on an edge without that flag, (c) and (d) take the same path, and the output says so;
 *   (e) direct from the origin.
 * The plain clones' response caches are filled by one untimed plain clone each beforehand (a
 * cache serves from its second request on). Per competitor: wall time, origin requests and
 * bytes, CPU seconds of the edge that served it (each edge a `gitedge serve` process of its own,
 * read from /proc) and the bytes in that edge's store afterwards (snapshot packs, plus any cached
 * answers). Every clone's refs must equal the origin's, and each must have taken its path (URIs
 * fetched, bundles served, no pack work at the origin for (a)-(d)).
 *
 * Then an incremental fetch after the origin gains `--commits` (20) commits and the edge refreshes
 * (a new snapshot layer): `git fetch` in a clone made with `git clone --bundle-uri=<the edge's
 * list>` (it downloads only the newer bundle, then fetches the remainder) against `git fetch` in a
 * direct clone.
 *
 * Repositories (`--repos git,big`): git's history to v2.0.0 (165k objects, 54 MB) and a generated
 * one of ≥ 300 MB (test/support/big_repo.ts: 20,000 commits of small text files with real delta
 * chains plus 320 MiB of incompressible 1 MiB blobs; cached in the fixture cache after the first
 * run, which generates it). `--quick`: git v2.0.0 only, one run. Every clone uses git 2.55
 * (`shared/tools/modern-git.sh`, or `$GITEDGE_MODERN_GIT`), so the clients differ only in their
 * configuration.
 *
 *   deno run -A bench/bundles.ts [--quick] [--repos git,big] [--runs 1] [--chunks 4] [--commits 20]
 */
import { git, tempDir } from "../test/support/git.ts";
import { modernGit } from "../test/support/git_builds.ts";
import { addCommits } from "../test/support/fixtures.ts";
import type { Origin } from "../test/support/origin.ts";
import { copyBigRepoInto, GIT_SIZED } from "../test/support/big_repo.ts";
import { urisFetched } from "../test/support/traced_git.ts";
import {
  bareFromBundle,
  bytesUnder,
  type Cell,
  edgeHelp,
  type EdgeProcess,
  flags,
  interleaved,
  loadavg,
  median,
  packStats,
  printResult,
  ratio,
  settleDisk,
  spawnOrigin,
  startEdgeProcess,
  timed,
  warmEdge,
} from "./harness/mod.ts";

const QUICK = flags.has("quick");
const REPOS = QUICK ? ["git"] : flags.list("repos", ["git", "big"]);
const RUNS = QUICK ? 1 : flags.number("runs", 1);
const CHUNKS = String(flags.number("chunks", 4));
const COMMITS = flags.number("commits", 20);

/** The generated repository: ≥ 300 MB of packs (320 MiB of random blobs), 160k objects. */
export const BIG_SPEC = { ...GIT_SIZED, commits: 20_000, binaryBytes: 320 << 20, seed: 300 };

const modernBuild = await modernGit();
if (typeof modernBuild === "string") {
  throw new Error(`the bundles bench needs git 2.55: ${modernBuild}`);
}
const modern = modernBuild;
const GIT = modern.bin;
const run = (args: string[], cwd?: string) => git(args, { bin: GIT, cwd });

/** Whether this edge has the plain-clones-from-the-snapshot setting (issue #25, item 3). */
const PLAIN_FLAG = "--snapshot-plain-clones";
const hasPlainFlag = (await edgeHelp()).includes(PLAIN_FLAG);

/** One clone's figures. */
interface Sample {
  wall: number;
  requests: number;
  bytes: number;
  /** `fetch` commands the origin answered (each one a pack it computed). */
  fetches: number;
  edgeCpu: number | null;
  storeBytes: number | null;
}

interface Competitor {
  label: string;
  edge: EdgeProcess | null;
  store: string | null;
  /** Clones into `dir`; throws unless the clone took this competitor's path. */
  clone(dir: string): Promise<void>;
}

async function metric(edgeUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

/** The branches and tags of a repository (a bundle clone's refs/bundles/* left out). */
async function refs(repo: string): Promise<Map<string, string>> {
  const out = await run(
    ["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", "refs/tags/"],
    repo,
  );
  return new Map(
    out.trim().split("\n").filter(Boolean).map((line) => {
      const [id, name] = line.split(" ");
      return [name, id] as const;
    }),
  );
}

/** Throws unless `got` holds every ref of `want` at the same object. */
function sameRefs(what: string, want: Map<string, string>, got: Map<string, string>): void {
  const wrong = [...want].filter(([name, id]) => got.get(name) !== id).map(([name]) => name);
  if (wrong.length > 0) {
    throw new Error(`${what}: ${wrong.length} refs differ from the origin's, e.g. ${wrong[0]}`);
  }
}

async function benchRepo(kind: string) {
  await using work = await tempDir("gitedge-bundles-");
  const root = `${work.path}/origin`;
  await Deno.mkdir(root);
  const bare = `${root}/repo.git`;
  if (kind === "big") {
    console.log("generated repository from the fixture cache (the first run generates it)…");
    await git(["init", "-q", "--bare", "--initial-branch=main", bare]);
    await copyBigRepoInto(bare, BIG_SPEC);
  } else {
    await bareFromBundle(bare);
  }
  const { objects, packMB } = await packStats(bare);
  const name = kind === "big" ? "generated" : "git v2.0.0";
  console.log(`${name}: ${objects} objects, ${packMB.toFixed(0)} MB of packs`);
  const branch = (await git(["symbolic-ref", "--short", "HEAD"], { cwd: bare })).trim();
  const originRefs = await refs(bare);

  const origin = await spawnOrigin(root);
  const storeA = `${work.path}/store-a`, storeB = `${work.path}/store-b`;
  const edge = await startEdgeProcess(origin.url, storeA, ["--chunks", CHUNKS]);
  // The response cache keeps answers of up to a quarter of its budget (1 GiB by default): (d)'s
  // edge gets a budget the repository's answer fits in; (c)'s edge keeps the defaults.
  const cacheBudget = Math.max(1 << 30, Math.ceil(packMB * 1e6 * 5));
  const cacheEdge = await startEdgeProcess(origin.url, storeB, [
    "--chunks",
    CHUNKS,
    "--response-cache-bytes",
    String(cacheBudget),
    ...(hasPlainFlag ? [`${PLAIN_FLAG}=false`] : []),
  ]);
  try {
    const build = await timed(() => warmEdge(edge.url, "repo.git"));
    await warmEdge(cacheEdge.url, "repo.git");
    const snapshotBytes = await bytesUnder(storeB);
    console.log(`snapshot build ${build.toFixed(1)} s, ${(snapshotBytes / 1e6).toFixed(1)} MB`);

    let n = 0;
    const dir = () => `${work.path}/c${n++}`;
    const check = async (label: string, d: string) => sameRefs(label, originRefs, await refs(d));
    // The response caches serve from their second request on: one plain clone each first.
    for (const e of [edge, cacheEdge]) {
      const d = dir();
      await run(["clone", "-q", "--bare", `${e.url}/repo.git`, d]);
      await Deno.remove(d, { recursive: true });
    }

    const competitors: Competitor[] = [
      {
        label: "(a) packfile URIs",
        edge,
        store: storeA,
        async clone(d) {
          const out = await new Deno.Command(GIT, {
            args: [
              "-c",
              "fetch.uriProtocols=http",
              "clone",
              "-q",
              "--bare",
              `${edge.url}/repo.git`,
              d,
            ],
            env: { GIT_TRACE: "1" },
            stdout: "null",
            stderr: "piped",
          }).output();
          const trace = new TextDecoder().decode(out.stderr);
          if (!out.success) throw new Error(`URI clone failed: ${trace.slice(-2000)}`);
          if (urisFetched(trace).length === 0) throw new Error("the URI clone fetched no pack URI");
          await check(this.label, d);
        },
      },
      {
        label: "(b) bundle URIs",
        edge,
        store: storeA,
        async clone(d) {
          const before = await metric(edge.url, "gitedge_bundles_served_total");
          await run([
            "-c",
            "transfer.bundleURI=true",
            "clone",
            "-q",
            "--bare",
            `${edge.url}/repo.git`,
            d,
          ]);
          if (await metric(edge.url, "gitedge_bundles_served_total") === before) {
            throw new Error("the bundle clone downloaded no bundle");
          }
          await check(this.label, d);
        },
      },
      {
        label: hasPlainFlag
          ? "(c) plain, from the snapshot"
          : "(c) plain (no snapshot plain clones on this edge)",
        edge,
        store: storeA,
        async clone(d) {
          await run(["clone", "-q", "--bare", `${edge.url}/repo.git`, d]);
          await check(this.label, d);
        },
      },
      {
        label: "(d) plain, from the response cache",
        edge: cacheEdge,
        store: storeB,
        async clone(d) {
          await run(["clone", "-q", "--bare", `${cacheEdge.url}/repo.git`, d]);
          await check(this.label, d);
        },
      },
      {
        label: "(e) direct",
        edge: null,
        store: null,
        async clone(d) {
          await run(["clone", "-q", "--bare", `${origin.url}/repo.git`, d]);
          await check(this.label, d);
        },
      },
    ];

    const samples = await interleaved(
      RUNS,
      competitors.map((c) => async (): Promise<Sample> => {
        const d = dir();
        await settleDisk();
        await origin.reset();
        const cpu0 = c.edge?.cpuSeconds() ?? 0;
        const wall = await timed(() => c.clone(d));
        const o = await origin.stats();
        const edgeCpu = c.edge ? c.edge.cpuSeconds() - cpu0 : null;
        await Deno.remove(d, { recursive: true });
        const s: Sample = {
          wall,
          requests: o.requests,
          bytes: o.bytesOut,
          fetches: o.commands.fetch ?? 0,
          edgeCpu,
          storeBytes: c.store ? await bytesUnder(c.store) : null,
        };
        console.log(
          `  ${c.label}: ${wall.toFixed(2)} s, origin ${s.requests} req ${
            (s.bytes / 1e6).toFixed(3)
          } MB` +
            `, edge CPU ${edgeCpu?.toFixed(2) ?? "–"} s; load ${loadavg()}`,
        );
        return s;
      }),
    );
    const m = (xs: Sample[], k: keyof Sample) => {
      const values = xs.map((x) => x[k]).filter((v): v is number => v !== null);
      return values.length ? median(values) : undefined;
    };
    const direct = samples[competitors.length - 1];
    const rows: Cell[][] = competitors.map((c, i) => [
      c.label,
      m(samples[i], "wall")!.toFixed(2),
      ratio(m(direct, "wall"), m(samples[i], "wall")),
      m(samples[i], "requests"),
      m(samples[i], "fetches"),
      (m(samples[i], "bytes")! / 1e6).toFixed(3),
      m(samples[i], "edgeCpu")?.toFixed(2),
      m(samples[i], "storeBytes") === undefined
        ? null
        : (m(samples[i], "storeBytes")! / 1e6).toFixed(1),
    ]);

    // The incremental fetch: yesterday's clones, the origin moves, the edge refreshes.
    const listUrl = `${edge.url}/_edge/bundle-list/repo.git`;
    const mine = dir(), theirs = dir();
    await run([
      "clone",
      "-q",
      "--no-checkout",
      `--bundle-uri=${listUrl}`,
      `${edge.url}/repo.git`,
      mine,
    ]);
    await run(["clone", "-q", "--no-checkout", `${origin.url}/repo.git`, theirs]);
    const fixtureOrigin = { root } as unknown as Origin;
    const added = await addCommits(fixtureOrigin, "repo.git", { commits: COMMITS, branch });
    const refresh = await timed(() => warmEdge(edge.url, "repo.git"));
    const fetchRows: Cell[][] = [];
    const fetched: Record<string, number> = {};
    for (
      const [label, d, e] of [["fetch by bundles", mine, edge], [
        "direct fetch",
        theirs,
        null,
      ]] as const
    ) {
      await settleDisk();
      await origin.reset();
      const cpu0 = e?.cpuSeconds() ?? 0;
      const bundles0 = e ? await metric(e.url, "gitedge_bundles_served_total") : 0;
      const wall = await timed(() => run(["fetch", "-q", "origin"], d));
      const o = await origin.stats();
      const tip = (await run(["rev-parse", `refs/remotes/origin/${branch}`], d)).trim();
      if (tip !== added.tip) {
        throw new Error(`${label}: ${branch} at ${tip}, origin at ${added.tip}`);
      }
      const bundles = e ? await metric(e.url, "gitedge_bundles_served_total") - bundles0 : null;
      fetched[label] = wall;
      fetchRows.push([
        label,
        wall.toFixed(2),
        o.requests,
        o.commands.fetch ?? 0,
        (o.bytesOut / 1e6).toFixed(3),
        e ? (e.cpuSeconds() - cpu0).toFixed(2) : null,
        bundles,
      ]);
    }
    const plainNote = hasPlainFlag
      ? `(c) streams the snapshot's packs (${PLAIN_FLAG} on by default); (d) runs on a second ` +
        `edge with ${PLAIN_FLAG}=false`
      : `this edge has no ${PLAIN_FLAG}: (c) is a plain clone through an edge with the default ` +
        `settings (its response cache, or the origin when the answer is too big to cache); (d) ` +
        `the same through an edge whose cache fits it`;
    printResult({
      title: `warm bare clones of ${name} (${objects} objects, ${packMB.toFixed(0)} MB), git ${
        modern.version.join(".")
      }, ${RUNS} run(s), medians; snapshot ${CHUNKS} packs, built in ${
        build.toFixed(1)
      } s; load ${loadavg()}`,
      headers: [
        "clone",
        "wall s",
        "direct / it",
        "origin req",
        "origin fetches",
        "origin MB",
        "edge CPU s",
        "edge store MB",
      ],
      rows,
      ratios: [
        plainNote,
        `(d)'s edge: --response-cache-bytes ${cacheBudget} (an answer is cached up to a quarter of ` +
        `the budget); (c)'s edge: the defaults (1 GiB)`,
        ...competitors.slice(2, 4).flatMap((c, k) =>
          (m(samples[k + 2], "fetches") ?? 0) > 0
            ? [`${c.label.slice(0, 3)}: the origin computed the pack (not served by the edge)`]
            : []
        ),
        `origin bytes, direct / each: ${
          competitors.slice(0, -1).map((c, i) =>
            `${c.label.slice(0, 3)} ${
              ratio(m(direct, "bytes"), Math.max(1, m(samples[i], "bytes")!), 0)
            }`
          ).join(", ")
        }`,
        `store: the snapshot alone is ${
          (snapshotBytes / 1e6).toFixed(1)
        } MB; a cached plain answer adds a full copy`,
      ],
    });
    printResult({
      title:
        `incremental fetch after ${COMMITS} new commits on ${branch} (edge refresh: a new layer, built in ${
          refresh.toFixed(1)
        } s)`,
      headers: [
        "fetch",
        "wall s",
        "origin req",
        "origin fetches",
        "origin MB",
        "edge CPU s",
        "bundles downloaded",
      ],
      rows: fetchRows,
      ratios: [
        `direct / by bundles: ${ratio(fetched["direct fetch"], fetched["fetch by bundles"])}`,
      ],
    });
  } finally {
    await cacheEdge.stop();
    await edge.stop();
    await origin.stop();
  }
}

for (const kind of REPOS) await benchRepo(kind);
