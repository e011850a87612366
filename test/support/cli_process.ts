/** Runs the `gitedge` CLI as a subprocess, the way a user would. */
import { GIT_ENV } from "./git.ts";

/** What a finished CLI run printed and returned. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

const CLI = new URL("../../edge/deno/cli.ts", import.meta.url).pathname;

/** Runs `gitedge clone ARGS` in `cwd` with stdout and stderr piped (so not terminals). */
export async function runCloneCli(args: string[], cwd: string): Promise<CliRun> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", CLI, "clone", ...args],
    cwd,
    env: GIT_ENV,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

/** The `--json` summary of `gitedge clone`. */
export interface CloneJson {
  directory: string;
  bytesInline: number;
  bytesByUri: number;
  seconds: number;
  /** Seconds from the Deno runtime's start to the clone's (start-up and module loading). */
  startedAt?: number;
  /** When each step of the clone ended, seconds since it started (see `CloneSummary.phases`). */
  phases?: Record<string, number>;
  packs: { hash: string; bytes: number; seconds: number; retries: number }[];
}

/** `gitedge clone` exited with a failure code. */
export class CliFailedError extends Error {
  override name = "CliFailedError";
  constructor(readonly args: string[], readonly run: CliRun) {
    super(`gitedge clone ${args.join(" ")} exited ${run.code}: ${run.stderr}`);
  }
}

/** Runs `gitedge clone --json ARGS`, throws with its stderr unless it exits 0, parses the summary. */
export async function cloneJson(args: string[], cwd: string): Promise<CloneJson> {
  const run = await runCloneCli(["--json", ...args], cwd);
  if (run.code !== 0) throw new CliFailedError(args, run);
  return JSON.parse(run.stdout) as CloneJson;
}
