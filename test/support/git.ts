/** Running real git from tests. */

export interface GitOptions {
  /** The git to run (default: `git` on PATH, Debian's 2.39); see `git_builds.ts`. */
  bin?: string;
  cwd?: string;
  env?: Record<string, string>;
  stdin?: Uint8Array;
}

export class GitCommandError extends Error {
  override name = "GitCommandError";
  constructor(readonly args: string[], readonly code: number, readonly stderr: string) {
    super(`git ${args.join(" ")} exited with ${code}: ${stderr.trim()}`);
  }
}

/** Environment that isolates git from the user's and system's configuration. */
export const GIT_ENV: Record<string, string> = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "gitedge test",
  GIT_AUTHOR_EMAIL: "test@gitedge.invalid",
  GIT_COMMITTER_NAME: "gitedge test",
  GIT_COMMITTER_EMAIL: "test@gitedge.invalid",
  GIT_TERMINAL_PROMPT: "0",
};

/** Runs git and returns stdout as bytes; throws `GitCommandError` on a non-zero exit. */
export async function gitBytes(args: string[], opts: GitOptions = {}): Promise<Uint8Array> {
  const cmd = new Deno.Command(opts.bin ?? "git", {
    args,
    cwd: opts.cwd,
    env: { ...GIT_ENV, ...opts.env },
    stdin: opts.stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  });
  const child = cmd.spawn();
  if (opts.stdin) {
    const w = child.stdin.getWriter();
    await w.write(opts.stdin);
    await w.close();
  }
  const out = await child.output();
  if (!out.success) {
    throw new GitCommandError(args, out.code, new TextDecoder().decode(out.stderr));
  }
  return out.stdout;
}

/** Options for {@link spawnGit}. */
export interface SpawnGitOptions {
  /** The git to run (default: `git` on PATH). */
  bin?: string;
  cwd?: string;
  env?: Record<string, string>;
  stdin?: "piped" | "null";
  stdout?: "piped" | "null";
}

/**
 * Starts git with {@link GIT_ENV} for streaming use (e.g. `fast-import`, `pack-objects`); stderr is
 * piped. The caller owns the child: feed/close stdin, read stdout and stderr, await its status.
 */
export function spawnGit(args: string[], opts: SpawnGitOptions = {}): Deno.ChildProcess {
  return new Deno.Command(opts.bin ?? "git", {
    args,
    cwd: opts.cwd,
    env: { ...GIT_ENV, ...opts.env },
    stdin: opts.stdin ?? "null",
    stdout: opts.stdout ?? "piped",
    stderr: "piped",
  }).spawn();
}

/** Runs git and returns stdout as text. */
export async function git(args: string[], opts: GitOptions = {}): Promise<string> {
  return new TextDecoder().decode(await gitBytes(args, opts));
}

/** A temporary directory removed on dispose (`await using dir = await tempDir()`). */
export async function tempDir(
  prefix = "gitedge-test-",
): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix });
  return {
    path,
    async [Symbol.asyncDispose]() {
      await Deno.remove(path, { recursive: true }).catch(() => {});
    },
  };
}
