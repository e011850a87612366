/**
 * `gitedge fetch`: a fetch into an existing clone (a CI runner's persistent workspace), done by
 * `git fetch` itself with packfile URIs accepted (`fetch.uriProtocols`) and protocol v2, so the
 * result is git's own. The edge offers packs by URI only to fetches without `have` lines (a
 * clone), so an incremental fetch gets one pack, computed once by the origin, either way; what
 * this command adds is git's behaviour under a stop: SIGTERM and SIGINT end git (which removes
 * its temporary packs) and exit 143 / 130.
 */
import { SIGNAL_EXIT, type StopSignal } from "./signals.ts";
import { VERSION } from "../version.ts";

const HELP = `usage: gitedge fetch [<git fetch options>] [<repository> [<refspec>...]]

Runs 'git fetch' in the current repository with packfile URIs accepted (http, https) and
protocol v2: every git fetch option works, the result is git's. SIGTERM and SIGINT stop it
(exit 143 / 130). For a first checkout use 'gitedge clone', which downloads packs in parallel.
`;

/** The `git` arguments `gitedge fetch ARGS` runs. */
export function gitFetchArgs(args: readonly string[]): string[] {
  return [
    "-c",
    "protocol.version=2",
    "-c",
    "fetch.uriProtocols=https,http",
    "fetch",
    ...args,
  ];
}

/** Runs `gitedge fetch` and returns its exit code. */
export async function fetchMain(args: string[]): Promise<number> {
  if (args.includes("-h") || args.includes("--help")) {
    console.log(HELP);
    return 0;
  }
  if (args.includes("--version")) {
    console.log(`gitedge version ${VERSION}`);
    return 0;
  }
  const child = new Deno.Command("git", {
    args: gitFetchArgs(args),
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
  let stoppedBy: StopSignal | null = null;
  const listeners = (Object.keys(SIGNAL_EXIT) as StopSignal[]).map((name) => {
    const listener = () => {
      stoppedBy ??= name;
      try {
        child.kill(name);
      } catch { /* git has ended meanwhile */ }
    };
    Deno.addSignalListener(name, listener);
    return [name, listener] as const;
  });
  try {
    const status = await child.status;
    return stoppedBy !== null ? SIGNAL_EXIT[stoppedBy] : status.code;
  } finally {
    for (const [name, listener] of listeners) Deno.removeSignalListener(name, listener);
  }
}
