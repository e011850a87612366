/**
 * What the Deno server's TCP front (edge/deno/front.ts: connection cap, header and idle
 * deadlines) costs on a large pack download: `curl` fetches a pack-sized file from `Deno.serve`
 * directly and through the front, interleaved round by round; also from `node:http` in Deno
 * (which has headersTimeout, keepAliveTimeout and maxConnections of its own) as a reference.
 * Prints wall-clock medians, MB/s, the server's CPU seconds per download and the ratios.
 * Also the latency of small streamed responses (headers, then a body read from the file in two
 * chunks, as a ranged pack read is sent) over one kept-alive connection: 200 requests in one `curl`, per request.
 *
 * Usage: deno run --allow-all bench/deno_front.ts [--mib 256] [--runs 5]
 */
import http from "node:http";
import fs from "node:fs";
import { Front } from "../edge/deno/front.ts";
import { Metrics } from "../src/proxy/core/metrics.ts";
import {
  cpuTimes,
  flags,
  interleaved,
  loadavg,
  median,
  printResult,
  ratio,
} from "./harness/mod.ts";

const mib = flags.number("mib", 256);
const runs = flags.number("runs", 5);
const dir = await Deno.makeTempDir({ prefix: "gitedge-front-bench-" });
const file = `${dir}/pack`;
{
  const out = await Deno.open(file, { write: true, create: true });
  const block = crypto.getRandomValues(new Uint8Array(1 << 16));
  for (let i = 0; i < mib * 16; i++) await out.write(block);
  out.close();
}
const size = mib << 20;

/** This process's own CPU seconds so far (the servers'; curl is a child, not counted). */
const cpuSeconds = () => cpuTimes().own;

const bare = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
  if (new URL(req.url).pathname === "/small") {
    // Read from the file as the body is pulled, as the store's ranged reads are.
    const f = await Deno.open(file);
    let left = 200;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        const buf = new Uint8Array(Math.min(100, left));
        const n = left > 0 ? await f.read(buf) : null;
        if (n === null) {
          f.close();
          return c.close();
        }
        left -= n;
        c.enqueue(buf.subarray(0, n));
      },
    });
    return new Response(body, { headers: { "content-length": "200" } });
  }
  const f = await Deno.open(file);
  return new Response(f.readable, { headers: { "content-length": String(size) } });
});
const metrics = new Metrics();
const front = new Front({
  hostname: "127.0.0.1",
  port: 0,
  upstreamPort: bare.addr.port,
  maxConnections: 1024,
  headerTimeoutMs: 30_000,
  idleTimeoutMs: 60_000,
  metrics,
});
const node = http.createServer((_req, res) => {
  res.writeHead(200, { "content-length": String(size) });
  fs.createReadStream(file).pipe(res);
});
await new Promise<void>((r) => node.listen(0, "127.0.0.1", () => r()));
const nodePort = (node.address() as { port: number }).port;

async function download(port: number): Promise<{ s: number; cpu: number }> {
  const cpu0 = cpuSeconds();
  const t0 = performance.now();
  const out = await new Deno.Command("curl", {
    args: ["-sS", "-o", "/dev/null", "-w", "%{size_download}", `http://127.0.0.1:${port}/pack`],
    stdout: "piped",
  }).output();
  const s = (performance.now() - t0) / 1000;
  const got = Number(new TextDecoder().decode(out.stdout));
  if (!out.success || got !== size) throw new Error(`download got ${got} of ${size} bytes`);
  return { s, cpu: cpuSeconds() - cpu0 };
}

const names = ["Deno.serve", "front -> Deno.serve", "node:http"];
const ports = [bare.addr.port, front.addr.port, nodePort];
const results = await interleaved(runs, ports.map((p) => () => download(p)));
const wall = results.map((r) => median(r.map((x) => x.s)));
const cpu = results.map((r) => median(r.map((x) => x.cpu)));
/** Milliseconds per request of `count` small requests over one kept-alive connection. */
async function smallRequests(port: number, count = 200): Promise<number> {
  const url = `http://127.0.0.1:${port}/small`;
  const args = ["-sS", ...Array.from({ length: count }, () => ["-o", "/dev/null", url]).flat()];
  const t0 = performance.now();
  const out = await new Deno.Command("curl", { args }).output();
  if (!out.success) throw new Error(`curl failed: ${new TextDecoder().decode(out.stderr)}`);
  return (performance.now() - t0) / count;
}
const small = await interleaved(runs, ports.slice(0, 2).map((p) => () => smallRequests(p)));
const perRequest = small.map((r) => median(r));
printResult({
  title: `deno_front: ${mib} MiB download by curl over loopback, ${runs} interleaved rounds, ` +
    `medians; load ${loadavg()}`,
  headers: ["server", "wall s", "MiB/s", "server CPU s", "small response ms"],
  rows: names.map((name, i) => [
    name,
    wall[i].toFixed(3),
    (mib / wall[i]).toFixed(0),
    cpu[i].toFixed(2),
    i < 2 ? perRequest[i].toFixed(2) : null,
  ]),
  ratios: [
    `front / bare: wall ${ratio(wall[1], wall[0])}, CPU ${ratio(cpu[1], cpu[0])}`,
    `node:http / bare: wall ${ratio(wall[2], wall[0])}, CPU ${ratio(cpu[2], cpu[0])}`,
    `200 small streamed responses over one connection: the front adds ${
      (perRequest[1] - perRequest[0]).toFixed(2)
    } ms per request`,
  ],
});
await front.closeAll();
await bare.shutdown();
await new Promise((r) => node.close(r));
await Deno.remove(dir, { recursive: true });
