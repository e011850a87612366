/**
 * CPU of streaming a plain clone's pack from the snapshot (src/proxy/fetch/streamed_fetch.ts) on git's
 * own history to v2.0.0 (165k objects, 54 MB pack, from $GITEDGE_GIT_BUNDLE, default
 * /work/shared/data/git-v2.0.0.bundle), against the Workers CPU limit (30 s by default, up to
 * 5 min configurable on paid plans).
 *
 *   deno run -A bench/snapshot_stream_cpu.ts [--rounds 3]
 *
 * In workerd (Miniflare, local R2; bench/snapshot_stream_worker.ts): the workerd process's CPU
 * seconds (/proc, user + system) for one request, draining the answer, by mode: `raw` (the R2
 * body as it is: the floor, local R2 and the response), `stored` (side-band framed, a one-pack
 * snapshot: nothing hashed), `join` (side-band framed through `joinedPack`: SHA-1 over every byte
 * with @noble/hashes, what a several-pack snapshot costs) and `digest` (the runtime's native
 * `crypto.DigestStream` SHA-1 over the same bytes). The Worker's own CPU for a mode is its figure
 * less `raw`'s; workerd's RSS is sampled every 50 ms during each request (peak over the start). In Deno, the same code in process (the Deno server's cost): CPU seconds of
 * `joinedPack` + `sidebandPack` over the pack read from a file, `onePack` likewise, and
 * `node:crypto` SHA-1 for comparison. Rounds interleave the modes; medians are printed.
 */
import { cpuUsage } from "node:process";
import { createHash } from "node:crypto";
import { startWorker } from "../test/support/worker_harness.ts";
import { tempDir } from "../test/support/git.ts";
import { joinedPack, onePack } from "../src/git/pack_join.ts";
import { sidebandPack } from "../src/proxy/fetch/streamed_fetch.ts";
import { encodePkts } from "../src/git/pktline.ts";
import type { R2Bucket } from "../edge/cloudflare/worker_types.ts";

const BUNDLE = Deno.env.get("GITEDGE_GIT_BUNDLE") ?? "/work/shared/data/git-v2.0.0.bundle";
const i = Deno.args.indexOf("--rounds");
const ROUNDS = i >= 0 ? Number(Deno.args[i + 1]) : 3;

/** The pack of a git bundle (everything after the header's blank line). */
async function packOfBundle(path: string): Promise<Uint8Array> {
  const bytes = await Deno.readFile(path);
  for (let at = 0; at < (1 << 20); at++) {
    if (bytes[at] === 10 && bytes[at + 1] === 10) return bytes.subarray(at + 2);
  }
  throw new Error("no bundle header end");
}

function cpuSeconds(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

function childWorkerd(): number[] {
  const pids: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (comm === "workerd" && ppid === Deno.pid) pids.push(Number(entry.name));
    } catch {
      // ended meanwhile
    }
  }
  return pids;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

await using work = await tempDir();
const pack = await packOfBundle(BUNDLE);
const objects = new DataView(pack.buffer, pack.byteOffset + 8, 4).getUint32(0);
const packPath = `${work.path}/git.pack`;
await Deno.writeFile(packPath, pack);
console.log(`git v2.0.0 pack: ${(pack.length / 1e6).toFixed(1)} MB, ${objects} objects`);

// In Deno.
const deno: Record<string, number[]> = { join: [], stored: [], "node:crypto": [] };
const drain = async (s: ReadableStream<Uint8Array>) => {
  let n = 0;
  for await (const c of s) n += c.length;
  return n;
};
const filePart = {
  size: pack.length,
  objects,
  open: async () => (await Deno.open(packPath)).readable,
};
for (let r = 0; r < ROUNDS; r++) {
  for (const mode of Object.keys(deno)) {
    const before = cpuUsage();
    if (mode === "node:crypto") {
      const h = createHash("sha1");
      for await (const c of (await Deno.open(packPath)).readable) h.update(c);
      h.digest();
    } else {
      const p = mode === "join" ? joinedPack([filePart], "sha1") : onePack([filePart], "sha1");
      await drain(sidebandPack(encodePkts(["packfile\n"]), p, () => {}, (e) => {
        throw e;
      }));
    }
    const used = cpuUsage(before);
    deno[mode].push((used.user + used.system) / 1e6);
  }
}

// In workerd.
const before = new Set(childWorkerd());
await using worker = await startWorker({
  entry: "bench/snapshot_stream_worker.ts",
  r2Buckets: ["PACKS"],
  persistDir: `${work.path}/workerd`,
});
const pid = childWorkerd().find((p) => !before.has(p));
if (pid === undefined) throw new Error("workerd process not found");
const bucket = await worker.miniflare.getR2Bucket("PACKS") as unknown as R2Bucket;
await bucket.put("pack", pack);
const workerd: Record<string, number[]> = { raw: [], stored: [], join: [], digest: [] };
const growth: Record<string, number[]> = { raw: [], stored: [], join: [], digest: [] };
let bytes: Record<string, number> = {};
for (let r = 0; r < ROUNDS; r++) {
  for (const mode of Object.keys(workerd)) {
    await new Promise((res) => setTimeout(res, 300));
    const start = cpuSeconds(pid);
    const idle = rssMiB(pid);
    let peak = idle;
    const sampler = setInterval(() => peak = Math.max(peak, rssMiB(pid)), 50);
    const res = await fetch(`${worker.url}/stream?mode=${mode}&objects=${objects}`);
    const n = await drain(res.body!);
    clearInterval(sampler);
    growth[mode].push(peak - idle);
    await new Promise((res) => setTimeout(res, 300));
    workerd[mode].push(cpuSeconds(pid) - start);
    bytes = { ...bytes, [mode]: n };
  }
}
const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
console.log(`rounds: ${ROUNDS}, load ${load}`);
console.log("workerd process CPU s per request (median; all):");
for (const [mode, xs] of Object.entries(workerd)) {
  const over = median(xs) - median(workerd.raw);
  console.log(
    `  ${mode.padEnd(8)} ${median(xs).toFixed(2)}  (${xs.map((x) => x.toFixed(2)).join(", ")})` +
      `  over raw ${over.toFixed(2)}  bytes ${bytes[mode]}` +
      `  RSS growth MiB ${growth[mode].map((x) => x.toFixed(0)).join(", ")}`,
  );
}
console.log("Deno in-process CPU s (median; all):");
for (const [mode, xs] of Object.entries(deno)) {
  console.log(
    `  ${mode.padEnd(12)} ${median(xs).toFixed(2)}  (${xs.map((x) => x.toFixed(2)).join(", ")})`,
  );
}
