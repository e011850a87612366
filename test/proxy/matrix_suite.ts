/**
 * The client/origin matrix: every git operation a user runs, with git 2.39 and git 2.55 as the
 * origin (`http-backend`; 2.55 advertising a bundle list) and as the client, with and without
 * `fetch.uriProtocols`, before and after the edge holds a snapshot. Each cell runs the operation
 * through the edge and against the origin directly and requires the same outcome: refs, HEAD,
 * `fsck --full`, checked-out tree and object set (or the same output, for ls-remote). Warm full
 * clones that asked for URIs must get them.
 *
 * Cells share one origin and one edge per origin git and run a few at a time; a cell failing
 * does not stop the others, and the test prints the matrix before failing.
 */
import { GIT_ENV, GitCommandError, tempDir } from "../support/git.ts";
import { type GitBuild, gitBuilds } from "../support/git_builds.ts";
import { type Origin, startOrigin } from "../support/origin.ts";
import { addCommits, assertSameClone, assertSameObjects } from "../support/fixtures.ts";
import { makeAwkwardRepo } from "../support/awkward.ts";
import type { EdgeFactory } from "../support/edge.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { urisFetched, warm } from "./edge_suite.ts";

/** Runs the client git in a cell, collecting its trace (for the URIs it fetched). */
type Run = (args: string[], cwd?: string) => Promise<string>;

interface OpContext {
  /** Repository URL (through the edge or at the origin). */
  url: (repo: string) => string;
  /** Where this side of the cell works. */
  dir: string;
  run: Run;
  origin: Origin;
  /** The repository this cell may change (its own copy at the origin), if the op mutates. */
  own: string;
}

interface Op {
  name: string;
  /** Runs the operation; returns what to compare: a repository directory or a text. */
  run(c: OpContext): Promise<{ repo?: string; text?: string; alsoRepo?: string }>;
  /** Needs a copy of the fixture of its own (it moves or pushes to the origin). */
  mutates?: boolean;
  /** A warm run asking for URIs gets the snapshot by URI. */
  getsUris?: boolean;
  /** Repository name the op reads (default the awkward fixture). */
  repo?: string;
  /** Only on origins that advertise bundle URIs. */
  bundles?: boolean;
  /** `protocol.version` for the client (default 2). */
  protocol?: string;
  /** Extra `-c` settings for the client. */
  config?: string[];
}

const FIXTURE = "awk.git";
const SIDE = "side/only";
const DATED = { GIT_AUTHOR_DATE: "1700000000 +0000", GIT_COMMITTER_DATE: "1700000000 +0000" };

const clone = (
  name: string,
  flags: string[],
  getsUris = false,
  repo?: string,
  extra: Partial<Op> = {},
): Op => ({
  name,
  getsUris,
  repo,
  ...extra,
  async run(c) {
    await c.run([
      ...(extra.config ?? []),
      "clone",
      "-q",
      ...flags,
      c.url(repo ?? FIXTURE),
      `${c.dir}/r`,
    ]);
    return { repo: `${c.dir}/r` };
  },
});

const lazy = (name: string, filter: string): Op => ({
  name,
  async run(c) {
    await c.run(["clone", "-q", `--filter=${filter}`, c.url(FIXTURE), `${c.dir}/r`]);
    // Lazy fetches through the same server: another branch's trees and blobs, old diffs.
    await c.run(["checkout", "-q", SIDE], `${c.dir}/r`);
    await c.run(["log", "-p", "-3", "--format=%H", "main"], `${c.dir}/r`);
    return { repo: `${c.dir}/r` };
  },
});

const moved = (name: string, step: "fetch" | "pull"): Op => ({
  name,
  mutates: true,
  async run(c) {
    await c.run(["clone", "-q", c.url(c.own), `${c.dir}/r`]);
    await addCommits(c.origin, c.own, { commits: 2, tag: "moved" });
    await addCommits(c.origin, c.own, { commits: 1, branch: SIDE });
    if (step === "fetch") await c.run(["fetch", "-q", "origin"], `${c.dir}/r`);
    else await c.run(["pull", "-q", "--ff-only"], `${c.dir}/r`);
    return { repo: `${c.dir}/r` };
  },
});

export const OPS: Op[] = [
  clone("clone", [], true),
  clone("clone --bare", ["--bare"], true),
  clone("clone --mirror", ["--mirror"], true),
  clone("clone --single-branch", ["--single-branch", "--branch", SIDE]),
  clone("clone --no-tags", ["--no-tags"]),
  clone("clone --depth 1", ["--depth", "1"]),
  clone("clone --shallow-since", ["--shallow-since=2020-01-07"]),
  lazy("clone --filter=blob:none + lazy", "blob:none"),
  lazy("clone --filter=tree:0 + lazy", "tree:0"),
  {
    name: "clone --recurse-submodules",
    getsUris: true,
    async run(c) {
      await c.run(["clone", "-q", "--recurse-submodules", c.url(FIXTURE), `${c.dir}/r`]);
      return { repo: `${c.dir}/r`, alsoRepo: `${c.dir}/r/sub` };
    },
  },
  moved("fetch after the origin moved", "fetch"),
  moved("pull after the origin moved", "pull"),
  {
    name: "push",
    mutates: true,
    async run(c) {
      await c.run(["clone", "-q", c.url(c.own), `${c.dir}/r`]);
      await Deno.writeTextFile(`${c.dir}/r/pushed.txt`, "pushed\n");
      await c.run(["add", "pushed.txt"], `${c.dir}/r`);
      await c.run(["commit", "-q", "-m", "pushed"], `${c.dir}/r`);
      await c.run(
        ["push", "-q", "origin", "HEAD:main", "HEAD:refs/heads/new/ブランチ"],
        `${c.dir}/r`,
      );
      return { repo: `${c.origin.root}/${c.own}` };
    },
  },
  {
    name: "ls-remote",
    async run(c) {
      return { text: await c.run(["ls-remote", c.url(FIXTURE)], undefined) };
    },
  },
  // git >= 2.40 unbundles first, so its fetch is incremental: no URIs expected there.
  clone("clone --mirror, transfer.bundleURI", ["--mirror"], false, undefined, {
    bundles: true,
    config: ["-c", "transfer.bundleURI=true"],
  }),
  clone("clone, protocol v0", [], false, undefined, { protocol: "0" }),
  clone("clone, protocol v1", [], false, undefined, { protocol: "1" }),
  clone("clone SHA-256", [], true, "sha256.git"),
  clone("clone empty", [], false, "empty.git"),
];

interface Cell {
  origin: string;
  client: string;
  op: string;
  uris: boolean;
  phase: "cold" | "warm";
  error?: string;
}

/** Options for {@link matrixSuite}. */
export interface MatrixOptions {
  /** Only cells where client and origin are the same git (default: every pair). */
  samePairsOnly?: boolean;
  /** Cells running at once (default 4). */
  concurrency?: number;
  /** Restrict to these op names. */
  ops?: string[];
  /**
   * Also the cold cells without `fetch.uriProtocols` (passed through to the origin; warm, a plain
   * clone of exactly the snapshot's tips is streamed from it instead): default false.
   */
  coldPlain?: boolean;
  testOptions?: Pick<Deno.TestDefinition, "sanitizeOps" | "sanitizeResources">;
}

export function matrixSuite(factory: EdgeFactory, runtime: string, opts: MatrixOptions = {}) {
  Deno.test({
    name: `[${runtime}] matrix: git 2.39/2.55 origins and clients, every operation, cold and warm`,
    ...opts.testOptions,
    fn: async () => {
      const { builds, missing } = await gitBuilds();
      const cells: Cell[] = [];
      for (const originGit of builds) {
        const clients = opts.samePairsOnly ? [originGit] : builds;
        cells.push(...await runForOrigin(factory, originGit, clients, opts));
      }
      const table = renderMatrix(cells);
      console.log(table);
      const failed = cells.filter((c) => c.error);
      assertEquals(
        failed.map((c) =>
          `${c.origin} | ${c.client} | ${c.op} | uris ${c.uris} | ${c.phase}: ${c.error}`
        ),
        [],
        `${failed.length} of ${cells.length} cells failed${missing ? ` (${missing})` : ""}`,
      );
    },
  });
}

async function runForOrigin(
  factory: EdgeFactory,
  originGit: GitBuild,
  clients: GitBuild[],
  opts: MatrixOptions,
): Promise<Cell[]> {
  const bundles = originGit.version[0] > 2 || originGit.version[1] >= 40;
  await using origin = await startOrigin({ gitBin: originGit.bin, bundleUris: bundles });
  await using scratch = await tempDir("gitedge-matrix-");
  await makeAwkwardRepo(origin, FIXTURE, `${scratch.path}/fixture`);
  await makeAwkwardRepo(origin, "sha256.git", `${scratch.path}/fixture256`, {
    objectFormat: "sha256",
  });
  await origin.createBare("empty.git");
  if (bundles) await origin.publishBundle(FIXTURE);
  await using edge = await factory({ origin: origin.url, chunks: 3 });
  const ops = OPS.filter((o) =>
    (!opts.ops || opts.ops.includes(o.name)) && (!o.bundles || bundles)
  );
  let copies = 0;
  const copyOf = async () => {
    const name = `copy-${copies++}.git`;
    await new Deno.Command("cp", {
      args: ["-a", `${origin.root}/${FIXTURE}`, `${origin.root}/${name}`],
    })
      .output();
    return name;
  };

  // The direct runs do not depend on the edge: one per client and operation.
  const direct = new Map<string, Promise<{ repo?: string; text?: string; alsoRepo?: string }>>();
  const directOf = (client: GitBuild, op: Op) => {
    const key = `${client.label}|${op.name}`;
    let p = direct.get(key);
    if (!p) {
      p = (async () => {
        const dir = `${scratch.path}/direct-${direct.size}`;
        await Deno.mkdir(dir);
        const own = op.mutates ? await copyOf() : FIXTURE;
        return await op.run({
          url: (repo) => origin.repoUrl(repo),
          dir,
          run: runner(client, true, [], op.protocol),
          origin,
          own,
        });
      })();
      direct.set(key, p);
    }
    return p;
  };

  const cells: Cell[] = [];
  let n = 0;
  const runPhase = async (phase: "cold" | "warm") => {
    const jobs: (() => Promise<void>)[] = [];
    for (const client of clients) {
      for (const op of ops) {
        for (const uris of [true, false]) {
          if (phase === "cold" && !uris && !opts.coldPlain) continue;
          jobs.push(async () => {
            const cell: Cell = {
              origin: originGit.label,
              client: client.label,
              op: op.name,
              uris,
              phase,
            };
            cells.push(cell);
            try {
              const expected = await directOf(client, op);
              const dir = `${scratch.path}/cell-${n++}`;
              await Deno.mkdir(dir);
              const own = op.mutates ? await copyOf() : FIXTURE;
              if (op.mutates && phase === "warm") await warm(edge, own);
              const traces: string[] = [];
              const got = await op.run({
                url: (repo) => `${edge.url}/${repo}`,
                dir,
                run: runner(client, uris, traces, op.protocol),
                origin,
                own,
              });
              if (expected.text !== undefined) {
                assertEquals(got.text, expected.text, "output");
              } else {
                await assertSameClone(expected.repo!, got.repo!);
                await assertSameObjects(expected.repo!, got.repo!);
              }
              if (expected.alsoRepo) {
                await assertSameClone(expected.alsoRepo, got.alsoRepo!);
                await assertSameObjects(expected.alsoRepo, got.alsoRepo!);
              }
              if (phase === "warm" && uris && op.getsUris) {
                assert(urisFetched(traces.join("\n")).length > 0, "warm: packs by URI");
              }
            } catch (e) {
              cell.error = (e instanceof Error ? e.message : String(e)).split("\n").slice(0, 6)
                .join(" / ");
            }
          });
        }
      }
    }
    await pool(jobs, opts.concurrency ?? 4);
  };
  await runPhase("cold");
  for (const repo of [FIXTURE, "sha256.git", `${FIXTURE.replace(".git", "")}-sub.git`]) {
    await warm(edge, repo);
  }
  await warm(edge, "empty.git");
  await runPhase("warm");
  return cells;
}

/**
 * The client git with `protocol` (v2 unless the op says otherwise) and, if `uris`, URIs asked
 * for; traced (GIT_TRACE on stderr, kept in `traces`); returns stdout.
 */
function runner(client: GitBuild, uris: boolean, traces: string[], protocol = "2"): Run {
  return async (args, cwd) => {
    const config = [
      "-c",
      `protocol.version=${protocol}`,
      ...(uris ? ["-c", "fetch.uriProtocols=http"] : []),
    ];
    const out = await new Deno.Command(client.bin, {
      args: [...config, ...args],
      cwd,
      env: { ...GIT_ENV, ...DATED, GIT_TRACE: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    traces.push(stderr);
    if (!out.success) {
      throw new GitCommandError(args, out.code, stderr.split("\n").slice(-8).join("\n"));
    }
    return new TextDecoder().decode(out.stdout);
  };
}

async function pool(jobs: (() => Promise<void>)[], concurrency: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) await jobs[next++]();
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, jobs.length) }, worker));
}

/** One row per operation, one column per origin/client/URIs/phase: `ok` or `FAIL`. */
export function renderMatrix(cells: Cell[]): string {
  const columns = [...new Set(cells.map(columnOf))];
  const ops = [...new Set(cells.map((c) => c.op))];
  const width = Math.max(...ops.map((o) => o.length));
  const lines = [
    "matrix columns: " + columns.map((c, i) => `[${i + 1}] ${c}`).join("; "),
    `${"".padEnd(width)}  ${columns.map((_, i) => String(i + 1).padStart(4)).join("")}`,
  ];
  for (const op of ops) {
    const row = columns.map((col) => {
      const cell = cells.find((c) => c.op === op && columnOf(c) === col);
      return (cell === undefined ? "-" : cell.error ? "FAIL" : "ok").padStart(4);
    });
    lines.push(`${op.padEnd(width)}  ${row.join("")}`);
  }
  const passed = cells.filter((c) => !c.error).length;
  lines.push(`${passed} of ${cells.length} cells pass`);
  return lines.join("\n");
}

function columnOf(c: Cell): string {
  return `origin ${c.origin.slice(4)} client ${c.client.slice(4)} ${
    c.uris ? "uris" : "plain"
  } ${c.phase}`;
}
