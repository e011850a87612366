/**
 * The processes a bench measures from outside, each in a process of its own so /proc can tell
 * their CPU and memory apart from the clients':
 *   - `gitedge serve` ({@link startEdgeProcess}: filesystem store, port chosen by the kernel);
 *   - a test origin (`git http-backend`, test/support/origin.ts) ({@link spawnOrigin}), driven
 *     over stdin, one command a line, each answered with one JSON line on stdout:
 *
 *       stats   → {"cpu": seconds, "requests": n, "commands": {...}, "bytesOut": n}
 *       reset   → the same, then zeroes the request counters (CPU keeps counting)
 *
 *     (`deno run -A bench/harness/processes.ts <root>` is that child; it prints {"url": "..."} first).
 */
import { startOrigin } from "../../test/support/origin.ts";
import { cpuSeconds, peakRssMiB } from "./proc.ts";

/** A running `gitedge serve`; `stop()` sends SIGTERM and waits for it to exit. */
export interface EdgeProcess {
  url: string;
  pid: number;
  /** User + system CPU seconds of the edge and its reaped children so far. */
  cpuSeconds(): number;
  /** Peak resident set (VmHWM) in MiB. */
  peakRssMiB(): number;
  stop(): Promise<void>;
}

const CLI = new URL("../../edge/deno/cli.ts", import.meta.url).pathname;

/** Starts `gitedge serve --port 0 --origin <origin> --store <store> [...extra]`. */
export async function startEdgeProcess(
  origin: string,
  store: string,
  extra: string[] = [],
): Promise<EdgeProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "serve",
      "--port",
      "0",
      "--origin",
      origin,
      "--store",
      store,
      ...extra,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  let listening: RegExpExecArray | null;
  while (!(listening = /listening on (\S+)/.exec(out))) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`gitedge serve exited: ${out}`);
    out += value;
  }
  // Keep reading its log (a line per request), so the server never blocks on a full pipe; kept
  // in the file GITEDGE_BENCH_EDGE_LOG names, if any (where a bench's time goes, request by
  // request).
  const keep = Deno.env.get("GITEDGE_BENCH_EDGE_LOG");
  const file = keep ? await Deno.open(keep, { write: true, create: true, append: true }) : null;
  const encoder = new TextEncoder();
  const drained = (async () => {
    for (;;) {
      const r = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (r.done) break;
      if (file && r.value) await file.write(encoder.encode(r.value));
    }
    file?.close();
  })();
  return {
    url: listening[1],
    pid: child.pid,
    cpuSeconds: () => cpuSeconds(child.pid),
    peakRssMiB: () => peakRssMiB(child.pid),
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      await drained;
    },
  };
}

/** The options `gitedge serve --help` lists (e.g. to use a flag only where this edge has it). */
export async function edgeHelp(): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "serve", "--help"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return decoder.decode(out.stdout) + decoder.decode(out.stderr);
}

/** What a bench sees of an origin process. */
export interface OriginStatsLine {
  cpu: number;
  requests: number;
  commands: Record<string, number>;
  bytesOut: number;
}

/** A running origin process. */
export interface OriginProcess {
  url: string;
  stats(): Promise<OriginStatsLine>;
  /** The stats so far, then the request counters start again from zero. */
  reset(): Promise<OriginStatsLine>;
  stop(): Promise<void>;
}

/** Starts the origin process over `root` (a directory of bare repositories). */
export async function spawnOrigin(root: string): Promise<OriginProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, root],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const writer = child.stdin.getWriter();
  let buffered = "";
  const nextLine = async (): Promise<string> => {
    for (;;) {
      const nl = buffered.indexOf("\n");
      if (nl >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        return line;
      }
      const { value, done } = await lines.read();
      if (done) throw new Error("origin process exited");
      buffered += value;
    }
  };
  const { url } = JSON.parse(await nextLine()) as { url: string };
  const ask = async (cmd: string): Promise<OriginStatsLine> => {
    await writer.write(new TextEncoder().encode(`${cmd}\n`));
    return JSON.parse(await nextLine());
  };
  return {
    url,
    stats: () => ask("stats"),
    reset: () => ask("reset"),
    async stop() {
      await writer.close().catch(() => {});
      await child.status;
      lines.releaseLock();
    },
  };
}

/** The origin child: serves `root`, answers `stats`/`reset` lines until stdin closes. */
async function originChild(root: string): Promise<void> {
  await using origin = await startOrigin({ root });
  const out = (o: unknown) => console.log(JSON.stringify(o));
  out({ url: origin.url });
  let buffered = "";
  for await (const text of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
    buffered += text;
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const cmd = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      const s = origin.stats;
      out({ cpu: cpuSeconds(), requests: s.requests, commands: s.commands, bytesOut: s.bytesOut });
      if (cmd === "reset") s.reset();
    }
  }
}

if (import.meta.main) {
  const root = Deno.args[0];
  if (!root) throw new Error("usage: processes.ts <root of bare repositories>");
  await originChild(root);
}
