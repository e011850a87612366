/** Repositories the benches serve, and the edge calls every bench makes. */
import { git } from "../../test/support/git.ts";

/** git's own history to v2.0.0 (165k objects, 54 MB): `$GITEDGE_GIT_BUNDLE` or the shared copy. */
export const GIT_BUNDLE = Deno.env.get("GITEDGE_GIT_BUNDLE") ??
  "/work/shared/data/git-v2.0.0.bundle";

/** Clones `bundle` into the bare repository `bare`, HEAD on master (as git.git's is). */
export async function bareFromBundle(bare: string, bundle = GIT_BUNDLE): Promise<void> {
  await git(["clone", "-q", "--bare", bundle, bare]);
  await git(["symbolic-ref", "HEAD", "refs/heads/master"], { cwd: bare });
}

/** Objects in packs and the packs' size (MB, 10^6 bytes) of a repository. */
export async function packStats(repo: string): Promise<{ objects: number; packMB: number }> {
  const counts = await git(["count-objects", "-v"], { cwd: repo });
  return {
    objects: Number(/in-pack: (\d+)/.exec(counts)![1]),
    packMB: Number(/size-pack: (\d+)/.exec(counts)![1]) * 1024 / 1e6,
  };
}

/** `POST /_edge/warm/<repo>`: builds the snapshot now; returns the edge's snapshot status. */
export async function warmEdge(edgeUrl: string, repo: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${edgeUrl}/_edge/warm/${repo}`, { method: "POST" });
  const text = await res.text();
  if (!res.ok) throw new Error(`warming ${repo} failed (${res.status}): ${text}`);
  return JSON.parse(text).snapshot;
}

/** Bytes under `path` (files only, recursively); 0 if it does not exist. */
export async function bytesUnder(path: string): Promise<number> {
  let total = 0;
  try {
    for await (const entry of Deno.readDir(path)) {
      const full = `${path}/${entry.name}`;
      if (entry.isDirectory) total += await bytesUnder(full);
      else if (entry.isFile) total += (await Deno.stat(full)).size;
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return total;
}
