/**
 * The snapshot in a fetch answer: the `packfile-uris` section naming its packs by signed URL, and
 * the edge's own answer to a fetch the snapshot covers alone.
 */
import { type Manifest, manifestPacks } from "../core/manifest.ts";
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import { recordOutcome } from "../core/request_record.ts";
import type { FetchCall, PlanOf } from "./fetch_call.ts";
import { publicBase } from "../core/context.ts";
import { signedPackUrl } from "../downloads/pack_urls.ts";
import { concat, encodePkt, FLUSH_PKT } from "../../git/pktline.ts";
import { sha1 } from "@noble/hashes/legacy.js";
import { sha256 } from "@noble/hashes/sha2.js";
import type { ObjectFormat } from "../../git/object_id.ts";
import { encodeFetchSection } from "../../git/fetch_response.ts";
import { formatPackfileUriLine } from "../../git/packfile_uris.ts";
import { UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";

/** An empty version-2 pack in `format`: its 12-byte header, and that header's hash as trailer. */
function emptyPack(format: ObjectFormat): Uint8Array {
  const header = new Uint8Array([0x50, 0x41, 0x43, 0x4b, 0, 0, 0, 2, 0, 0, 0, 0]);
  return concat([header, format === "sha256" ? sha256(header) : sha1(header)]);
}

/**
 * The edge's own answer to a fetch whose wants are all snapshot tips: the `packfile-uris` section
 * and an empty pack in the snapshot's object format (band 1), in the order upload-pack writes a response to `done`; section
 * headers are banded too under `sideband-all`. The origin does no pack work at all.
 */
export async function answerFromSnapshot(
  call: FetchCall,
  plan: PlanOf<"answer-from-snapshot">,
): Promise<Response> {
  const { ctx, repo, url } = call;
  const { manifest } = plan;
  const { sidebandAll } = call.args;
  ctx.registry?.noteFetch(repo, "answered", true, call.seen);
  const section = await packfileUrisSection(ctx, repo, manifest, url, sidebandAll);
  const empty = emptyPack(manifest.objectFormat ?? "sha1");
  const banded = new Uint8Array(empty.length + 1);
  banded[0] = 1;
  banded.set(empty, 1);
  const body = concat([
    section,
    encodeFetchSection("packfile", [], sidebandAll),
    encodePkt(banded),
    FLUSH_PKT,
  ]);
  recordOutcome(ctx, { action: "answered", packUris: manifestPacks(manifest).length });
  return new Response(body as Uint8Array<ArrayBuffer>, {
    status: 200,
    headers: {
      "content-type": UPLOAD_PACK_RESULT_TYPE,
      "cache-control": "no-cache",
    },
  });
}

export async function packfileUrisSection(
  ctx: ProxyContext,
  repo: RepoRef,
  manifest: Manifest,
  url: URL,
  sidebandAll: boolean,
): Promise<Uint8Array> {
  const base = publicBase(ctx, url);
  const lines: string[] = [];
  const now = Math.floor(ctx.deps.clock.now() / 1000);
  const ttl = ctx.deps.config.urlTtlSeconds;
  for (const pack of manifestPacks(manifest)) {
    const uri = await signedPackUrl(ctx.signer, base, repo.id, pack.key, now, ttl);
    lines.push(formatPackfileUriLine(pack.hash, uri));
  }
  return encodeFetchSection("packfile-uris", lines, sidebandAll);
}
