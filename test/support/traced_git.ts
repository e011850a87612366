/**
 * Stock git traced: which packfile URIs a clone fetched (`GIT_TRACE`), and the arguments of a
 * protocol v2 clone that accepts them. Used by `test/proxy/edge_suite.ts` and the benches.
 */
import { GIT_ENV, GitCommandError } from "./git.ts";

/**
 * Packfile URIs a traced stock-git clone fetched: each `git http-fetch --packfile=<hash> … <uri>`
 * it ran (GIT_TRACE logs a run several times; each pack counts once).
 */
export function urisFetched(trace: string): { hash: string; uri: string }[] {
  const out = new Map<string, { hash: string; uri: string }>();
  for (const line of trace.split("\n")) {
    if (!line.includes("http-fetch")) continue;
    const m = /--packfile=([0-9a-f]{64}|[0-9a-f]{40}).* '?(https?:\/\/[^' ]+)'?\s*$/.exec(line);
    if (m) out.set(m[1], { hash: m[1], uri: m[2] });
  }
  return [...out.values()];
}

/**
 * Runs stock git with `GIT_TRACE` (plus `opts.env`, e.g. `GIT_TRACE_PACKET`) on stderr; returns
 * stderr. Throws on failure.
 */
export async function tracedGit(
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; bin?: string } = {},
): Promise<string> {
  const out = await new Deno.Command(opts.bin ?? "git", {
    args,
    cwd: opts.cwd,
    env: { ...GIT_ENV, GIT_TRACE: "1", ...opts.env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  if (!out.success) {
    throw new GitCommandError(args, out.code, stderr.split("\n").slice(-15).join("\n"));
  }
  return stderr;
}

/** `git clone` arguments for a protocol v2 clone that accepts http packfile URIs. */
export const URI_CLONE = [
  "-c",
  "fetch.uriProtocols=http",
  "-c",
  "protocol.version=2",
  "clone",
  "-q",
];
