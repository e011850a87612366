/**
 * `gitedge serve` in a process of its own (filesystem store, port chosen by the kernel), so a
 * bench can read the edge's CPU and peak memory from /proc apart from the clients' and the
 * origin's. The counterpart of origin_process.ts.
 */

/** A running `gitedge serve`; `stop()` sends SIGTERM and waits for it to exit. */
export interface EdgeProcess {
  url: string;
  pid: number;
  /** User + system CPU seconds of the edge and its reaped children so far. */
  cpuSeconds(): Promise<number>;
  /** Peak resident set (VmHWM) in MiB. */
  peakRssMiB(): Promise<number>;
  stop(): Promise<void>;
}

/** Starts `gitedge serve --port 0 --origin <origin> --store <store> [...extra]`. */
export async function startEdgeProcess(
  origin: string,
  store: string,
  extra: string[] = [],
): Promise<EdgeProcess> {
  const cli = new URL("../edge/deno/cli.ts", import.meta.url).pathname;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      cli,
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
  // Keep reading its log (a line per request), so the server never blocks on a full pipe.
  const drained = (async () => {
    while (!(await reader.read().catch(() => ({ done: true }))).done) { /* discard */ }
  })();
  const proc = (file: string) => Deno.readTextFile(`/proc/${child.pid}/${file}`);
  return {
    url: listening[1],
    pid: child.pid,
    cpuSeconds: async () => {
      const stat = await proc("stat");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
    },
    peakRssMiB: async () => Number(/VmHWM:\s+(\d+) kB/.exec(await proc("status"))![1]) / 1024,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      await drained;
    },
  };
}
