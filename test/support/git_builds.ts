/**
 * The gits tests run on both sides of the edge: Debian's git (2.39) and a current git (2.55, built
 * once per machine by `shared/tools/modern-git.sh` and cached in ~/.cache/gitedge). Hosted origins
 * and CI runners run current git, which differs on the wire (capabilities before `command=`,
 * upload-pack refusing arguments it did not advertise, bundle-uri).
 */

import { skipped } from "./skips.ts";

/** One git installation: `bin` is its `git` (its `http-backend` and helpers come with it). */
export interface GitBuild {
  /** Short name for test names, e.g. `git 2.39`. */
  label: string;
  bin: string;
  /** `[major, minor]` of `git --version`. */
  version: [number, number];
}

async function describeGit(bin: string): Promise<GitBuild> {
  const out = await new Deno.Command(bin, { args: ["--version"], stdout: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout);
  const m = /git version (\d+)\.(\d+)/.exec(text);
  if (!out.success || !m) throw new Error(`${bin} --version printed ${JSON.stringify(text)}`);
  return { label: `git ${m[1]}.${m[2]}`, bin, version: [Number(m[1]), Number(m[2])] };
}

/** The git on PATH (Debian's 2.39 on our machines). */
export const systemGit: GitBuild = await describeGit("git");

/** Where `modern-git.sh` lives: `$GITEDGE_MODERN_GIT_SCRIPT`, else a `shared/tools` above the repo. */
function modernGitScript(): string | null {
  const env = Deno.env.get("GITEDGE_MODERN_GIT_SCRIPT");
  if (env) return env;
  // The repository root is two levels up from test/support/; look in the directories above it.
  let dir = new URL("../../", import.meta.url);
  for (let i = 0; i < 4; i++) {
    dir = new URL("../", dir);
    const candidate = `${decodeURIComponent(dir.pathname)}shared/tools/modern-git.sh`;
    try {
      Deno.statSync(candidate);
      return candidate;
    } catch {
      // not here; look one level up
    }
  }
  return null;
}

let modern: Promise<GitBuild | string> | undefined;

/**
 * The current git: `$GITEDGE_MODERN_GIT` (a `git` binary) if set, else what `modern-git.sh`
 * prints (it builds git once per machine, waiting for a build under way). A string says why there
 * is none (no script found); a failing build throws.
 */
export function modernGit(): Promise<GitBuild | string> {
  return modern ??= (async () => {
    const bin = Deno.env.get("GITEDGE_MODERN_GIT");
    if (bin) return await describeGit(bin);
    const script = modernGitScript();
    if (!script) {
      return "no current git: set GITEDGE_MODERN_GIT or GITEDGE_MODERN_GIT_SCRIPT " +
        "(shared/tools/modern-git.sh not found above the repository)";
    }
    const out = await new Deno.Command("bash", {
      args: [script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout).trim();
    if (!out.success) {
      throw new Error(`${script} failed: ${new TextDecoder().decode(out.stderr).slice(-2000)}`);
    }
    return await describeGit(text.split("\n").at(-1)!);
  })();
}

/**
 * Both gits, for tests that run against each: Debian's and the current one. Without a current git
 * the list holds only Debian's, and `missing` says why (reported with `skipped`, never silent).
 */
export async function gitBuilds(): Promise<{ builds: GitBuild[]; missing: string | null }> {
  const m = await modernGit();
  if (typeof m === "string") {
    skipped(
      "current git (2.55)",
      `${m}; edge suites and the matrix run with ${systemGit.label} only`,
    );
    return { builds: [systemGit], missing: m };
  }
  return { builds: [systemGit, m], missing: null };
}
