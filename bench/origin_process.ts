/**
 * A test origin (`git http-backend`, see test/support/origin.ts) in a process of its own, so a
 * bench can read the CPU the origin spends (its own plus every backend, upload-pack and
 * pack-objects it reaped) from /proc, apart from the clients'. Driven over stdin, one command a
 * line, each answered with one JSON line on stdout:
 *
 *   stats   → {"cpu": seconds, "requests": n, "commands": {...}, "bytesOut": n}
 *   reset   → the same, then zeroes the request counters (CPU keeps counting)
 *
 *   deno run -A bench/origin_process.ts <root>      prints {"url": "..."} first
 */
import { startOrigin } from "../test/support/origin.ts";

/** User + system CPU seconds of this process and its reaped children. */
async function cpuSeconds(): Promise<number> {
  const stat = await Deno.readTextFile("/proc/self/stat");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  return ticks / 100;
}

if (import.meta.main) {
  const root = Deno.args[0];
  if (!root) throw new Error("usage: origin_process.ts <root of bare repositories>");
  await using origin = await startOrigin({ root });
  const out = (o: unknown) => console.log(JSON.stringify(o));
  out({ url: origin.url });
  const lines = Deno.stdin.readable.pipeThrough(new TextDecoderStream());
  let buffered = "";
  for await (const text of lines) {
    buffered += text;
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const cmd = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      const s = origin.stats;
      out({
        cpu: await cpuSeconds(),
        requests: s.requests,
        commands: s.commands,
        bytesOut: s.bytesOut,
      });
      if (cmd === "reset") s.reset();
    }
  }
}

/** What a bench sees of an origin process. */
export interface OriginStatsLine {
  cpu: number;
  requests: number;
  commands: Record<string, number>;
  bytesOut: number;
}

/** Starts the origin process over `root`; `stats()`/`reset()` answer as described above. */
export async function spawnOrigin(root: string) {
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
