/**
 * The world of the end-to-end edge suites (edge_suite.ts and its parts): a real `git http-backend`
 * origin, the edge under test, a temporary directory and the client git, made afresh per case by
 * {@link suiteOf}'s `t`, and the helpers the cases share.
 */
import { git, type GitOptions, tempDir } from "../support/git.ts";
import { type GitBuild } from "../support/git_builds.ts";
import { encodePkts } from "../../src/git/pktline.ts";
import { type Origin, type OriginOptions, startOrigin } from "../support/origin.ts";
import {
  type EdgeFactory,
  type EdgeUnderTest,
  type EdgeUnderTestOptions,
} from "../support/edge.ts";
import { assertEquals } from "../support/assert.ts";
import { rawGet } from "../support/raw_http.ts";
import { tracedGit } from "../support/traced_git.ts";

/** POSTs a protocol v2 request `body` to `${repoUrl}/git-upload-pack`, as git does. */
export async function postUploadPack(repoUrl: string, body: Uint8Array): Promise<Response> {
  return await fetch(`${repoUrl}/git-upload-pack`, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
    },
    body: body as Uint8Array<ArrayBuffer>,
  });
}

/** Bytes as Latin-1 text (one char per byte), to search binary objects for ASCII strings. */
export function latin1(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    out += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return out;
}

/** `gitedge_fetch_passthrough_total` by reason, from `/_edge/metrics`. */
export async function passthroughCounts(edge: EdgeUnderTest): Promise<Record<string, number>> {
  const text = await (await fetch(`${edge.url}/_edge/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^gitedge_fetch_passthrough_total\{reason="([^"]*)"\} (\d+)$/gm)) {
    counts[m[1]] = Number(m[2]);
  }
  return counts;
}

/** The status of a GET of `url` (the body is discarded). */
export async function statusOf(url: string, init?: RequestInit): Promise<number> {
  const res = await fetch(url, init);
  await res.body?.cancel();
  return res.status;
}

export async function rawStatusOf(base: string, target: string): Promise<number> {
  return (await rawGet(base, target)).status;
}

export async function status(
  edge: EdgeUnderTest,
  repo: string,
  headers: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const res = await fetch(`${edge.url}/_edge/status/${repo}`, { headers });
  assertEquals(res.status, 200, "status route");
  return (await res.json()).snapshot;
}

export async function warm(
  edge: Pick<EdgeUnderTest, "url">,
  repo: string,
  headers: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const res = await fetch(`${edge.url}/_edge/warm/${repo}`, { method: "POST", headers });
  const body = await res.json();
  assertEquals(res.status, 200, `warm: ${JSON.stringify(body)}`);
  return body.snapshot;
}

export interface World {
  origin: Origin;
  edge: EdgeUnderTest;
  dir: string;
  /** The client git (see {@link SuiteGits}). */
  git: (args: string[], opts?: GitOptions) => Promise<string>;
  tracedGit: (
    args: string[],
    opts?: { cwd?: string; env?: Record<string, string> },
  ) => Promise<string>;
}

/** Which git serves as the origin (`http-backend`) and which clones, for one run of the suite. */
export interface SuiteGits {
  origin: GitBuild;
  client: GitBuild;
}

/** Test-name tag for a pair of gits: `git 2.39`, or `origin git 2.55, client git 2.39`. */
export function gitsLabel(g: SuiteGits): string {
  return g.origin.bin === g.client.bin
    ? g.origin.label
    : `origin ${g.origin.label}, client ${g.client.label}`;
}

/** A clone-style protocol-v2 fetch of `want` that accepts http packfile URIs. */
export function uriFetch(want: string): Uint8Array {
  return encodePkts([
    "command=fetch\n",
    "delim",
    "thin-pack\n",
    `want ${want}\n`,
    "packfile-uris http\n",
    "done\n",
    "flush",
  ]);
}

/** What a suite part registers its cases with: `t` makes a case; the gits and origin it runs. */
export interface Suite {
  t: (
    name: string,
    fn: (w: World) => Promise<void>,
    opts?: {
      originOptions?: OriginOptions;
      edge?: (origin: Origin) => Partial<EdgeUnderTestOptions>;
      /** Background builds are expected to fail (otherwise any failure fails the case). */
      buildsMayFail?: boolean;
    },
  ) => void;
  gits: SuiteGits;
  /** The origin advertises bundle URIs (git >= 2.40, as hosted ones do). */
  bundleUris: boolean;
}

/** The suite of `factory`'s edge (named `runtime` in test names) with `gits`. */
export function suiteOf(
  factory: EdgeFactory,
  runtime: string,
  gits: SuiteGits,
  testOptions: Pick<Deno.TestDefinition, "sanitizeOps" | "sanitizeResources"> = {},
): Suite {
  const client = gits.client.bin;
  // Current git origins advertise bundle URIs, as hosted ones (Gitaly) do.
  const bundleUris = gits.origin.version[0] > 2 ||
    (gits.origin.version[0] === 2 && gits.origin.version[1] >= 40);
  const t = (
    name: string,
    fn: (w: World) => Promise<void>,
    opts: {
      originOptions?: OriginOptions;
      edge?: (origin: Origin) => Partial<EdgeUnderTestOptions>;
      /** Background builds are expected to fail (otherwise any failure fails the case). */
      buildsMayFail?: boolean;
    } = {},
  ) =>
    Deno.test({
      name: `[${runtime}, ${gitsLabel(gits)}] ${name}`,
      ...testOptions,
      fn: async () => {
        await using origin = await startOrigin({
          gitBin: gits.origin.bin,
          bundleUris,
          ...opts.originOptions,
        });
        await using edge = await factory({ origin: origin.url, chunks: 3, ...opts.edge?.(origin) });
        await using dir = await tempDir();
        await fn({
          origin,
          edge,
          dir: dir.path,
          git: (args, o = {}) => git(args, { ...o, bin: client }),
          tracedGit: (args, o = {}) => tracedGit(args, { ...o, bin: client }),
        });
        await edge.stop(); // waits for builds in flight
        if (edge.buildErrors && !opts.buildsMayFail) {
          assertEquals(edge.buildErrors, [], "background snapshot builds failed");
        }
      },
    });
  return { t, gits, bundleUris };
}
