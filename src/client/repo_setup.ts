/**
 * Finishing a cloned repository the way `git clone` does: remote-tracking refs and tags, the
 * `origin` remote, HEAD and `origin/HEAD` (the connectivity check is in `connectivity.ts`).
 */
import type { Checkout } from "./checkout.ts";
import { CloneError } from "./errors.ts";
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

/** How the clone's `origin` remote is configured. */
export interface RemoteSetup {
  /** `remote.origin.fetch`, or null for none (bare, `--revision`). */
  fetchRefspec: string | null;
  /** `remote.origin.tagOpt = --no-tags`. */
  noTags?: boolean;
  /** A partial clone's filter: the remote becomes a promisor. */
  filter?: string;
}

/**
 * What a clone writes that needs no objects, so it can run while the packs arrive: the remote,
 * HEAD (symbolic), the checked-out branch's upstream config, `origin/HEAD` (when the remote's HEAD
 * is among `branches`). Returns HEAD's ref (null when detached, see {@link detachHead}, or for an
 * empty remote).
 */
export async function prepareRepository(
  gitDir: string,
  url: string,
  refs: RemoteRef[],
  branches: RemoteRef[],
  checkout: Checkout,
  bare: boolean,
  remote: RemoteSetup,
): Promise<string | null> {
  await configureRemote(gitDir, url, remote);
  const head = await writeHead(gitDir, checkout, bare);
  if (!bare) await writeRemoteHead(gitDir, refs, branches);
  return head;
}

/** `git clone -c key=value`: each added to the new repository's config, in order. */
export async function writeConfig(gitDir: string, pairs: [string, string][]): Promise<void> {
  for (const [key, value] of pairs) await runGit(["config", "--add", key, value], { gitDir });
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
export async function checkOut(
  directory: string,
  oid: string,
  signal?: AbortSignal,
): Promise<void> {
  await runGit(["-c", "checkout.workers=0", "read-tree", "-u", "--reset", oid], {
    cwd: directory,
    signal,
  });
}

/** `remote.origin.*` in git clone's order: url, tagOpt, fetch, then a promisor's settings. */
async function configureRemote(gitDir: string, url: string, remote: RemoteSetup): Promise<void> {
  await runGit(["config", "remote.origin.url", url], { gitDir });
  if (remote.noTags) await runGit(["config", "remote.origin.tagOpt", "--no-tags"], { gitDir });
  if (remote.fetchRefspec !== null) {
    await runGit(["config", "remote.origin.fetch", remote.fetchRefspec], { gitDir });
  }
  if (remote.filter !== undefined) {
    await runGit(["config", "core.repositoryformatversion", "1"], { gitDir });
    await runGit(["config", "remote.origin.promisor", "true"], { gitDir });
    await runGit(["config", "remote.origin.partialclonefilter", remote.filter], { gitDir });
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

/** `refs/remotes/origin/HEAD` follows the remote's HEAD when it names a branch the clone has. */
async function writeRemoteHead(
  gitDir: string,
  refs: RemoteRef[],
  branches: RemoteRef[],
): Promise<void> {
  const target = refs.find((r) => r.name === "HEAD")?.symrefTarget;
  if (!target?.startsWith("refs/heads/")) return;
  if (!branches.some((r) => r.name === target && r.oid !== null)) return;
  const branch = target.slice("refs/heads/".length);
  await runGit(["symbolic-ref", "refs/remotes/origin/HEAD", `refs/remotes/origin/${branch}`], {
    gitDir,
  });
}

/** `.git/shallow`: the commits whose parents a shallow clone lacks, sorted as git writes them. */
export async function writeShallow(gitDir: string, oids: string[]): Promise<void> {
  const lines = [...new Set(oids)].sort();
  await Deno.writeTextFile(`${gitDir}/shallow`, lines.map((oid) => `${oid}\n`).join(""));
}

/** Which of `oids` are in the repository (one `cat-file --batch-check`). */
export async function presentObjects(gitDir: string, oids: string[]): Promise<Set<string>> {
  // A missing object must not be fetched lazily (a partial clone): it is just absent. git 2.45+
  // reads GIT_NO_LAZY_FETCH; older ones fetch lazily only from a promisor remote.
  const out = await runGit(
    ["-c", "remote.origin.promisor=false", "cat-file", "--batch-check=%(objectname)"],
    { gitDir, stdin: oids.join("\n") + "\n", env: { GIT_NO_LAZY_FETCH: "1" } },
  );
  return new Set(out.split("\n").filter((line) => /^[0-9a-f]+$/.test(line)));
}

/**
 * `git clone --recurse-submodules`'s last step, left to git (with `submodule.active` already
 * configured): `git submodule update --init --recursive` in the new work tree.
 */
export async function updateSubmodules(
  directory: string,
  options: { quiet: boolean; signal?: AbortSignal },
): Promise<void> {
  await runGit(
    ["submodule", "update", "--init", "--recursive", ...(options.quiet ? ["--quiet"] : [])],
    { cwd: directory, signal: options.signal },
  );
}

/**
 * `git clone --reference`: each repository's object directory (absolute) goes into
 * `objects/info/alternates`, and its refs (and what their tags peel to) become the fetch's
 * `have`s, so only what the references lack comes over. Rejects a path that is not a repository.
 */
export async function addReferences(gitDir: string, repositories: string[]): Promise<string[]> {
  const objectDirs: string[] = [];
  const haves = new Set<string>();
  for (const repository of repositories) {
    let dir: string;
    try {
      dir = (await runGit(["-C", repository, "rev-parse", "--absolute-git-dir"])).trim();
    } catch {
      throw new CloneError(`reference repository '${repository}' is not a local repository.`);
    }
    objectDirs.push(`${dir}/objects`);
    const refs = await runGit(["for-each-ref", "--format=%(objectname) %(*objectname)"], {
      gitDir: dir,
    });
    for (const oid of refs.split(/\s+/)) if (oid) haves.add(oid);
  }
  await Deno.writeTextFile(
    `${gitDir}/objects/info/alternates`,
    objectDirs.map((d) => `${d}\n`).join(""),
  );
  return [...haves];
}
