/**
 * Finishing a cloned repository the way `git clone` does: remote-tracking refs and tags, the
 * `origin` remote, HEAD and `origin/HEAD` (the connectivity check is in `connectivity.ts`).
 */
import type { Checkout } from "./checkout.ts";
import { runGit } from "./git_command.ts";
import type { RemoteRef } from "./upload_pack.ts";

/**
 * Branches as remote-tracking refs (or as local branches when bare), tags as tags, and the local
 * branch a non-bare clone checks out: one `update-ref` once the objects are in.
 */
export async function writeRefs(
  gitDir: string,
  refs: RemoteRef[],
  bare: boolean,
  checkout: Checkout,
): Promise<void> {
  const lines: string[] = [];
  for (const ref of refs) {
    if (ref.oid === null) continue;
    if (ref.name.startsWith("refs/tags/")) lines.push(`create ${ref.name} ${ref.oid}`);
    else if (ref.name.startsWith("refs/heads/")) {
      const local = bare ? ref.name : `refs/remotes/origin/${ref.name.slice("refs/heads/".length)}`;
      lines.push(`create ${local} ${ref.oid}`);
    }
  }
  if (!bare && checkout.ref !== null && checkout.oid !== null) {
    lines.push(`create ${checkout.ref} ${checkout.oid}`);
  }
  if (lines.length > 0) {
    await runGit(["update-ref", "--stdin"], { gitDir, stdin: lines.join("\n") + "\n" });
  }
}

/**
 * What a clone writes that needs no objects, so it can run while the packs arrive: the remote,
 * HEAD (symbolic), the checked-out branch's upstream config, `origin/HEAD`. Returns HEAD's ref
 * (null when detached, see {@link detachHead}, or for an empty remote).
 */
export async function prepareRepository(
  gitDir: string,
  url: string,
  refs: RemoteRef[],
  checkout: Checkout,
  bare: boolean,
): Promise<string | null> {
  await configureRemote(gitDir, url, bare);
  const head = await writeHead(gitDir, checkout, bare);
  if (!bare) await writeRemoteHead(gitDir, refs);
  return head;
}

/** A detached HEAD at `oid` (the object must be in). */
export async function detachHead(gitDir: string, oid: string): Promise<void> {
  await runGit(["update-ref", "--no-deref", "HEAD", oid], { gitDir });
}

/**
 * Fills the index and work tree of the repository at `directory` from commit `oid`, refs left
 * alone (so it runs alongside writing them). Parallel checkout (`checkout.workers`, one per core)
 * for trees of at least `checkout.thresholdForParallelism` (100) files, as git clone could.
 */
export async function checkOut(directory: string, oid: string): Promise<void> {
  await runGit(["-c", "checkout.workers=0", "read-tree", "-u", "--reset", oid], {
    cwd: directory,
  });
}

/** `remote.origin.url`, plus git's default fetch refspec for non-bare clones. */
async function configureRemote(gitDir: string, url: string, bare: boolean): Promise<void> {
  await runGit(["config", "remote.origin.url", url], { gitDir });
  if (!bare) {
    await runGit(["config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"], {
      gitDir,
    });
  }
}

/**
 * Points HEAD like git clone does and configures the checked-out branch's upstream; the branch
 * ref itself comes with {@link writeRefs}. Returns HEAD's ref, or null when detached.
 */
async function writeHead(
  gitDir: string,
  checkout: Checkout,
  bare: boolean,
): Promise<string | null> {
  if (checkout.ref === null) return null;
  await runGit(["symbolic-ref", "HEAD", checkout.ref], { gitDir });
  if (bare || checkout.oid === null) return checkout.ref;
  const branch = checkout.ref.slice("refs/heads/".length);
  await runGit(["config", `branch.${branch}.remote`, "origin"], { gitDir });
  await runGit(["config", `branch.${branch}.merge`, checkout.ref], { gitDir });
  return checkout.ref;
}

/** `refs/remotes/origin/HEAD` follows the remote's HEAD when it names an existing branch. */
async function writeRemoteHead(gitDir: string, refs: RemoteRef[]): Promise<void> {
  const target = refs.find((r) => r.name === "HEAD")?.symrefTarget;
  if (!target?.startsWith("refs/heads/")) return;
  if (!refs.some((r) => r.name === target && r.oid !== null)) return;
  const branch = target.slice("refs/heads/".length);
  await runGit(["symbolic-ref", "refs/remotes/origin/HEAD", `refs/remotes/origin/${branch}`], {
    gitDir,
  });
}
