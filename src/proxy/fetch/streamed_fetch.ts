/**
 * A plain clone answered from the snapshot (plan `stream-snapshot`, fetch_plan.ts): a fetch
 * without `packfile-uris` whose wants are exactly the snapshot's tips gets the snapshot's packs
 * as the one pack of a normal protocol-v2 fetch response, streamed by the edge: a `packfile`
 * section whose band 1 carries one pack header for every object, each stored pack's entries as
 * stored and one trailer hashed as it streams (src/git/pack_join.ts; a snapshot of one pack goes
 * out as it is stored, nothing hashed). No recompression, no inflation, no origin pack; memory
 * stays flat in the repository's size (one store chunk at a time). Upload-pack's answer to a
 * `done` without haves, shallow or `want-ref` has no other section, so neither has this one.
 *
 * A pack that fails while streaming (gone from the store, cut short) ends the answer with a
 * band-3 error, which git reports and dies on (it never takes a partial pack).
 */
import { type Manifest, manifestPacks } from "../core/manifest.ts";
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import type { FetchCall, PlanOf } from "./fetch_call.ts";
import type { FetchArgs } from "../../git/fetch_request.ts";
import { onePack } from "../../git/pack_join.ts";
import { concat, FLUSH_PKT } from "../../git/pktline.ts";
import { encodeFetchSection } from "../../git/fetch_response.ts";
import {
  BAND_DATA,
  BAND_ERROR,
  BAND_PROGRESS,
  encodeSidebandText,
  SidebandFiller,
} from "../../git/sideband.ts";
import { UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";
import { recordOutcome } from "../core/request_record.ts";
import { noteBytesSaved } from "../ops/bytes_saved.ts";

/** The `stream-snapshot` outcome of a fetch plan, counted in the repository registry. */
export function streamedFetch(call: FetchCall, plan: PlanOf<"stream-snapshot">): Response {
  call.ctx.registry?.noteFetch(call.repo, "answered", true, call.seen);
  return streamSnapshot(call.ctx, call.repo, plan.manifest, call.args);
}

/** The edge's answer to a fetch the plan streams from `manifest`'s packs. */
export function streamSnapshot(
  ctx: ProxyContext,
  repo: RepoRef,
  manifest: Manifest,
  args: Pick<FetchArgs, "noProgress" | "sidebandAll">,
): Response {
  const packs = manifestPacks(manifest);
  const format = manifest.objectFormat ?? "sha1";
  const objects = packs.reduce((n, p) => n + p.objects, 0);
  const open = async (key: string) => {
    const obj = await ctx.deps.store.get(key);
    if (!obj) throw new Error("a snapshot pack vanished from the store while it was streamed");
    return obj.body;
  };
  const pack = onePack(
    packs.map((p) => ({ size: p.size, objects: p.objects, open: () => open(p.key) })),
    format,
  );
  const head = [encodeFetchSection("packfile", [], args.sidebandAll)];
  if (!args.noProgress) {
    const mib = (packs.reduce((n, p) => n + p.size, 0) / (1 << 20)).toFixed(1);
    head.push(
      encodeSidebandText(
        BAND_PROGRESS,
        `gitedge: ${objects} objects (${mib} MiB) from the snapshot\n`,
      ),
    );
  }
  ctx.metrics.inc("gitedge_fetch_streamed_total");
  const body = sidebandPack(concat(head), pack, (bytes) => {
    recordOutcome(ctx, { action: "pack", bytes });
    noteBytesSaved(ctx, repo.id, bytes, "stream");
  }, (error) => {
    ctx.deps.log?.log("warn", "snapshot_stream.failed", {
      repo: repo.path,
      error: error instanceof Error ? error.message : String(error),
    });
  });
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": UPLOAD_PACK_RESULT_TYPE,
      "cache-control": "no-cache",
    },
  });
}

/**
 * `head`, then `pack` framed as band-1 packets, then a flush; a pack that errors ends the stream
 * with a band-3 message and no flush instead. Packets are filled ({@link SidebandFiller}) to the most
 * side-band-64k allows
 * (65515 bytes of pack, 65520 with their header): store bodies come in chunks as small as 4 KiB
 * (local R2), which would otherwise each be a packet (13,165 instead of 823 for git's 54 MB
 * history; bench/snapshot_stream_cpu.ts). `sent` learns each packet's pack bytes as it goes out,
 * `failed` the error.
 */
export function sidebandPack(
  head: Uint8Array,
  pack: ReadableStream<Uint8Array>,
  sent: (bytes: number) => void,
  failed: (error: unknown) => void,
): ReadableStream<Uint8Array> {
  const reader = pack.getReader();
  const packets = new SidebandFiller(BAND_DATA);
  let started = false;
  const emit = (
    controller: ReadableStreamDefaultController<Uint8Array>,
    packet: Uint8Array,
  ) => {
    controller.enqueue(packet);
    sent(packet.length - 5);
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!started) {
        started = true;
        controller.enqueue(head);
        return;
      }
      for (;;) {
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
        } catch (error) {
          failed(error);
          controller.enqueue(encodeSidebandText(BAND_ERROR, "gitedge: the snapshot pack failed"));
          controller.close();
          return;
        }
        if (next.done) {
          const last = packets.flush();
          if (last) emit(controller, last);
          controller.enqueue(FLUSH_PKT);
          controller.close();
          return;
        }
        const full = packets.push(next.value);
        for (const packet of full) emit(controller, packet);
        if (full.length > 0) return;
      }
    },
    async cancel(reason) {
      await reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
