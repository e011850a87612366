/**
 * The control for `bench/worker_build.ts`: a trivial Worker, no gitedge code, that moves the same
 * bytes through its `PACKS` R2 binding the way a gitedge snapshot build does, one invocation per
 * build step, so workerd's memory growth can be split into what local R2 costs and what the build
 * itself costs.
 *
 *   POST /fetch?bytes=B&part=P&objects=N  B bytes as segments of P bytes (one `put` each), then the
 *                                          build's three index columns (13 bytes per object)
 *   POST /split?pack=K&sizes=S0,S1,...    reads every segment and the columns back, and writes
 *                                          pack K (S_K bytes, copied from the segments) as a
 *                                          multipart upload in parts of P bytes
 *   POST /publish                         writes a manifest, deletes the segments and columns
 *   POST /origin?url=U                    fetches U and reads its body to the end, discarding it
 *                                          (the build's origin fetch; bench/wrangler_dev.ts)
 *
 * Only the types come from the project (erased when bundled).
 */
import type { R2Bucket } from "../edge/cloudflare/worker_types.ts";

interface Env {
  PACKS: R2Bucket;
}

const TMP = "control/tmp/";
const COLUMNS: [string, number][] = [
  ["offsets", 8],
  ["kinds", 1],
  ["assignment", 4],
];

/** Pseudo-random bytes (xorshift), so nothing along the way can compress them. */
function fill(bytes: Uint8Array, seed: number): void {
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2);
  let x = seed | 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x;
  }
}

/** Integer query parameter `name`. */
function int(url: URL, name: string): number {
  const value = Number(url.searchParams.get(name));
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`bad ${name}`);
  return value;
}

/** State between steps (the Worker's module scope is kept between requests in one workerd). */
let layout: { segments: number; partBytes: number } | null = null;

async function fetchStep(env: Env, url: URL): Promise<Response> {
  const total = int(url, "bytes"), partBytes = int(url, "part"), objects = int(url, "objects");
  let segments = 0;
  for (let offset = 0; offset < total; offset += partBytes) {
    // A fresh buffer per segment, as the build's part reader allocates one per part.
    const segment = new Uint8Array(Math.min(partBytes, total - offset));
    fill(segment, segments + 1);
    await env.PACKS.put(`${TMP}segment-${segments}`, segment);
    segments++;
  }
  for (const [name, bytesPer] of COLUMNS) {
    const column = new Uint8Array(objects * bytesPer);
    fill(column, bytesPer);
    await env.PACKS.put(`${TMP}${name}`, column);
  }
  layout = { segments, partBytes };
  return Response.json({ segments });
}

async function splitStep(env: Env, url: URL): Promise<Response> {
  if (!layout) throw new Error("no fetch step yet");
  const { segments, partBytes } = layout;
  const pack = int(url, "pack");
  const sizes = url.searchParams.get("sizes")!.split(",").map(Number);
  for (const [name] of COLUMNS) {
    const column = await env.PACKS.get(`${TMP}${name}`);
    await new Response(column!.body).arrayBuffer();
  }
  // This pack's bytes sit after the packs before it, as a split pack's entries (roughly) do.
  const start = sizes.slice(0, pack).reduce((a, b) => a + b, 0);
  const end = start + sizes[pack];
  const upload = await env.PACKS.createMultipartUpload(`control/pack-${pack}.pack`);
  const uploaded = [];
  let part = new Uint8Array(Math.min(partBytes, end - start));
  let filled = 0;
  let position = 0;
  for (let i = 0; i < segments; i++) {
    const object = await env.PACKS.get(`${TMP}segment-${i}`);
    const reader = object!.body.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      const chunk = r.value;
      const from = Math.max(start, position), to = Math.min(end, position + chunk.byteLength);
      let at = from;
      while (at < to) {
        const n = Math.min(to - at, part.byteLength - filled);
        part.set(chunk.subarray(at - position, at - position + n), filled);
        filled += n;
        at += n;
        if (filled === part.byteLength) {
          uploaded.push(await upload.uploadPart(uploaded.length + 1, part));
          const left = end - (start + uploaded.length * partBytes);
          part = new Uint8Array(Math.min(partBytes, Math.max(left, 0)));
          filled = 0;
        }
      }
      position += chunk.byteLength;
    }
  }
  const object = await upload.complete(uploaded);
  return Response.json({ pack, bytes: object.size, parts: uploaded.length });
}

async function publishStep(env: Env): Promise<Response> {
  if (!layout) throw new Error("no fetch step yet");
  await env.PACKS.put("control/manifest.json", JSON.stringify({ segments: layout.segments }));
  for (let i = 0; i < layout.segments; i++) await env.PACKS.delete(`${TMP}segment-${i}`);
  for (const [name] of COLUMNS) await env.PACKS.delete(`${TMP}${name}`);
  return Response.json({ published: true });
}

async function originStep(url: URL): Promise<Response> {
  const res = await fetch(url.searchParams.get("url")!);
  let bytes = 0;
  const reader = res.body!.getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) bytes += r.value.byteLength;
  return Response.json({ status: res.status, bytes });
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    try {
      if (url.pathname === "/fetch") return await fetchStep(env, url);
      if (url.pathname === "/split") return await splitStep(env, url);
      if (url.pathname === "/publish") return await publishStep(env);
      if (url.pathname === "/origin") return await originStep(url);
      return new Response("not found", { status: 404 });
    } catch (error) {
      return new Response(String(error), { status: 500 });
    }
  },
};
