/**
 * A Deno edge with its git mirrors (docs/mirror.md) on a store of its own, for the mirror's tests:
 * `await using e = await startMirrorEdge({ origin, chunks: 2 })`. The store is a new temporary
 * directory removed when `e` goes, unless `store` names one that outlives the edge (restarts).
 */
import { startDenoEdge } from "../../edge/deno/server.ts";
import type { Logger } from "../../src/proxy/core/log.ts";
import { edgeConfigFor, type EdgeUnderTestOptions } from "./edge.ts";
import { encodePkts } from "../../src/git/pktline.ts";

export interface MirrorEdgeOptions extends EdgeUnderTestOptions {
  /** Off: the same edge without mirrors (the comparison). Default on. */
  mirror?: boolean;
  /** The mirrors' directory; `<store>/mirrors` when unset. */
  mirrorDir?: string;
  /** The git the mirrors run (a wrapper that kills or counts, a built git). */
  mirrorGit?: string;
  storeMaxBytes?: number;
  log?: Logger;
  /** A store directory the caller keeps (across restarts); a temporary one otherwise. */
  store?: string;
}

export interface MirrorEdge extends AsyncDisposable {
  url: string;
  store: string;
  /** Where the mirrors live (with no `mirrorDir`). */
  mirrors: string;
  edge: Awaited<ReturnType<typeof startDenoEdge>>;
}

export async function startMirrorEdge(opts: MirrorEdgeOptions): Promise<MirrorEdge> {
  const store = opts.store ?? await Deno.makeTempDir({ prefix: "gitedge-mirror-" });
  const edge = await startDenoEdge({
    store,
    port: 0,
    config: { ...edgeConfigFor(opts), storeMaxBytes: opts.storeMaxBytes },
    mirror: opts.mirror ?? true,
    mirrorDir: opts.mirrorDir,
    mirrorGit: opts.mirrorGit,
    ...(opts.log ? { log: opts.log } : {}),
    onBuildError: () => {},
  });
  return {
    url: edge.url,
    store,
    mirrors: `${store}/mirrors`,
    edge,
    [Symbol.asyncDispose]: async () => {
      await edge.stop();
      if (!opts.store) await Deno.remove(store, { recursive: true }).catch(() => {});
    },
  };
}

/** A protocol-v2 command (`lines`, pkt-lines) posted to `repoUrl`'s upload-pack with `headers`. */
function postV2(
  repoUrl: string,
  lines: (string | "delim" | "flush")[],
  headers: Record<string, string>,
): Promise<Response> {
  return fetch(`${repoUrl}/git-upload-pack`, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
      ...headers,
    },
    body: encodePkts(lines) as Uint8Array<ArrayBuffer>,
  });
}

/**
 * An `ls-refs` of branches and tags posted to `repoUrl` with `headers`, its answer read whole as
 * git reads it (a body cancelled early may cut the copy the edge reads on the side): the status.
 */
export async function rawLsRefs(repoUrl: string, headers: Record<string, string>): Promise<number> {
  const res = await postV2(repoUrl, [
    "command=ls-refs\n",
    "delim",
    "ref-prefix refs/heads/\n",
    "ref-prefix refs/tags/\n",
    "flush",
  ], headers);
  await res.bytes();
  return res.status;
}

/**
 * A protocol-v2 fetch of `want` (ofs-delta, done) posted to `repoUrl` with `headers`, as git would
 * send it: the status, and whether the answer holds a pack (any byte of the mirror's).
 */
export async function rawWantFetch(
  repoUrl: string,
  want: string,
  headers: Record<string, string>,
): Promise<{ status: number; pack: boolean }> {
  const res = await postV2(repoUrl, [
    "command=fetch\n",
    "delim",
    "ofs-delta\n",
    "no-progress\n",
    `want ${want}\n`,
    "done\n",
    "flush",
  ], headers);
  const body = new Uint8Array(await res.arrayBuffer());
  return { status: res.status, pack: new TextDecoder("latin1").decode(body).includes("PACK") };
}
