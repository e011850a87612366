/** Running git subcommands for the client (not for streaming packs: see `index_pack.ts`). */
import { GitProcessError } from "./errors.ts";

/** Options for {@link runGit}. */
export interface RunGitOptions {
  /** Sets `GIT_DIR`. */
  gitDir?: string;
  cwd?: string;
  /** Text fed to stdin (stdin is closed when absent). */
  stdin?: string;
  env?: Record<string, string>;
  /** Kills git when aborted (then rejects with the signal's reason). */
  signal?: AbortSignal;
}

/** Runs git to completion and returns its stdout; throws {@link GitProcessError} on failure. */
export async function runGit(args: string[], options: RunGitOptions = {}): Promise<string> {
  const env: Record<string, string> = { ...options.env };
  if (options.gitDir) env.GIT_DIR = options.gitDir;
  const child = new Deno.Command("git", {
    args,
    cwd: options.cwd,
    env,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
    signal: options.signal,
  }).spawn();
  const output = child.output();
  let writeError: unknown = null;
  if (options.stdin !== undefined) {
    const writer = child.stdin.getWriter();
    try {
      await writer.write(new TextEncoder().encode(options.stdin));
      await writer.close();
    } catch (error) {
      writeError = error;
    }
  }
  const out = await output;
  if (options.signal?.aborted) throw options.signal.reason;
  const decoder = new TextDecoder();
  if (!out.success) throw new GitProcessError(args, out.code, decoder.decode(out.stderr));
  if (writeError !== null) throw writeError;
  return decoder.decode(out.stdout);
}
