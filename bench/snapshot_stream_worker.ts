/**
 * The Worker side of `bench/snapshot_stream_cpu.ts`: streams the R2 object `pack` as a plain
 * clone's answer would (src/proxy/fetch/streamed_fetch.ts `sidebandPack`), by mode:
 *
 *   GET /stream?mode=raw      the R2 body as it is (the control: local R2 and the response alone)
 *   GET /stream?mode=stored   side-band framed, the pack as stored (`onePack` of one pack: a
 *                             one-pack snapshot, nothing hashed)
 *   GET /stream?mode=join     side-band framed, through `joinedPack` (new header, entries as
 *                             stored, SHA-1 trailer hashed as it streams with @noble/hashes: what
 *                             a snapshot of several packs costs)
 *   GET /stream?mode=digest   the R2 body through the runtime's native `crypto.DigestStream`
 *                             (SHA-1), for comparison with noble's
 */
import type { R2Bucket } from "../edge/cloudflare/worker_types.ts";
import { joinedPack, onePack } from "../src/git/pack_join.ts";
import { sidebandPack } from "../src/proxy/fetch/streamed_fetch.ts";
import { encodePkts } from "../src/git/pktline.ts";

interface Env {
  PACKS: R2Bucket;
}

interface DigestStreamCtor {
  new (algorithm: string): WritableStream<Uint8Array> & { digest: Promise<ArrayBuffer> };
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const mode = url.searchParams.get("mode");
    const head = await env.PACKS.head("pack");
    if (!head) return new Response("no pack", { status: 404 });
    const objects = Number(url.searchParams.get("objects"));
    const open = async () => (await env.PACKS.get("pack"))!.body as ReadableStream<Uint8Array>;
    const part = { size: head.size, objects, open };
    if (mode === "raw") return new Response(await open());
    if (mode === "digest") {
      const Ctor = (crypto as unknown as { DigestStream: DigestStreamCtor }).DigestStream;
      const sink = new Ctor("SHA-1");
      await (await open()).pipeTo(sink);
      const hex = [...new Uint8Array(await sink.digest)]
        .map((b) => b.toString(16).padStart(2, "0")).join("");
      return new Response(hex);
    }
    const pack = mode === "join" ? joinedPack([part], "sha1") : onePack([part], "sha1");
    return new Response(
      sidebandPack(encodePkts(["packfile\n"]), pack, () => {}, (e) => console.error(e)),
    );
  },
};
