/**
 * Finishing a cloned repository the way `git clone` does: the connectivity check, remote-tracking
 * refs and tags, the `origin` remote, HEAD and `origin/HEAD`.
 */
import type { Checkout } from "./checkout.ts";
import { ConnectivityError, GitProcessError } from "./errors.ts";
import { runGit } from "./git_command.ts";
import type { RemoteRef } from "./upload_pack.ts";

/** Every wanted object and everything it reaches must be present. */
export async function checkConnectivity(gitDir: string, wants: string[]): Promise<void> {
  try {
    await runGit(["rev-list", "--objects", "--quiet", "--stdin"], {
      gitDir,
      stdin: wants.join("\n") + "\n",
    });
  } catch (error) {
    if (error instanceof GitProcessError) throw new ConnectivityError(error.stderr);
    throw error;
  }
}

/** Branches as remote-tracking refs (or as local branches when bare), tags as tags. */
export async function writeRefs(gitDir: string, refs: RemoteRef[], bare: boolean): Promise<void> {
  const lines: string[] = [];
  for (const ref of refs) {
    if (ref.oid === null) continue;
    if (ref.name.startsWith("refs/tags/")) lines.push(`create ${ref.name} ${ref.oid}`);
    else if (ref.name.startsWith("refs/heads/")) {
      const local = bare ? ref.name : `refs/remotes/origin/${ref.name.slice("refs/heads/".length)}`;
      lines.push(`create ${local} ${ref.oid}`);
    }
  }
  if (lines.length > 0) {
    await runGit(["update-ref", "--stdin"], { gitDir, stdin: lines.join("\n") + "\n" });
  }
}

/** `remote.origin.url`, plus git's default fetch refspec for non-bare clones. */
export async function configureRemote(gitDir: string, url: string, bare: boolean): Promise<void> {
  await runGit(["config", "remote.origin.url", url], { gitDir });
  if (!bare) {
    await runGit(["config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"], {
      gitDir,
    });
  }
}

/** Points HEAD (and `origin/HEAD`) like git clone does; returns HEAD's ref or null. */
export async function writeHead(
  gitDir: string,
  checkout: Checkout,
  bare: boolean,
): Promise<string | null> {
  if (checkout.ref === null) {
    if (checkout.oid !== null) {
      await runGit(["update-ref", "--no-deref", "HEAD", checkout.oid], { gitDir });
    }
    return null;
  }
  await runGit(["symbolic-ref", "HEAD", checkout.ref], { gitDir });
  if (bare || checkout.oid === null) return checkout.ref;
  const branch = checkout.ref.slice("refs/heads/".length);
  await runGit(["update-ref", checkout.ref, checkout.oid], { gitDir });
  await runGit(["config", `branch.${branch}.remote`, "origin"], { gitDir });
  await runGit(["config", `branch.${branch}.merge`, checkout.ref], { gitDir });
  return checkout.ref;
}

/** `refs/remotes/origin/HEAD` follows the remote's HEAD when it names an existing branch. */
export async function writeRemoteHead(gitDir: string, refs: RemoteRef[]): Promise<void> {
  const target = refs.find((r) => r.name === "HEAD")?.symrefTarget;
  if (!target?.startsWith("refs/heads/")) return;
  if (!refs.some((r) => r.name === target && r.oid !== null)) return;
  const branch = target.slice("refs/heads/".length);
  await runGit(["symbolic-ref", "refs/remotes/origin/HEAD", `refs/remotes/origin/${branch}`], {
    gitDir,
  });
}
