/**
 * The edge's answer to protocol v2 `bundle-uri` for a warm repository, and whether it advertises
 * the command. Choice: while the snapshot in force says what each of its layers was built for
 * (src/proxy/bundles/bundle_list.ts), the edge advertises `bundle-uri` (whether the origin does or not)
 * and answers it with its own list, replacing the origin's; otherwise (cold, building, a pack
 * missing) the advertisement and the command are the origin's, passed through as sent.
 */
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import { bundleListAnswer, bundleListConfig, layerBundles } from "./bundle_list.ts";
import { currentSnapshot } from "../snapshots/current_snapshot.ts";
import { publicBase } from "../core/context.ts";
import type { CapabilityAdvertisement } from "../../git/capabilities.ts";
import { concat, DELIM_PKT, encodePkt, FLUSH_PKT, type Pkt, pktText } from "../../git/pktline.ts";
import { fromOrigin, noteOriginVerdict, recentlyAuthorised, relay } from "../origin/forwarding.ts";
import { forwardHeaders } from "../origin/origin.ts";
import { UPLOAD_PACK_REQUEST_TYPE, UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";

/**
 * The edge's answer to the `bundle-uri` request whose command and capability lines are `head`,
 * or null when the edge has no list for `repo` (the request then goes to the origin as sent).
 * Only a client the origin lets read the repository gets the list: one it accepted within the
 * credential memo's TTL, or else an `ls-refs` for no refs sent to the origin with the client's
 * credentials and capability lines (every v2 origin knows `ls-refs`, not all `bundle-uri`);
 * a refusal is relayed as the origin sent it.
 */
export async function answerBundleUri(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  url: URL,
  head: readonly Pkt[],
): Promise<Response | null> {
  // A coordinator that cannot answer leaves the request to the origin, as when cold.
  const list = await bundleList(ctx, repo, url).catch(() => null);
  if (!list) return null;
  const capabilities = head.filter((p) => p.type === "data").map((p) => pktText(p))
    .filter((line) => !line.startsWith("command="));
  return await refusedByOrigin(ctx, request, repo, capabilities) ?? await list();
}

/**
 * Null when the origin lets `request`'s client read `repo`: it accepted the client's credential
 * within the memo's TTL, or it answers an `ls-refs` for no refs sent with the client's
 * credentials and `capabilities` (every v2 origin knows `ls-refs`, not all `bundle-uri`); else
 * the origin's refusal, to relay.
 */
async function refusedByOrigin(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  capabilities: string[],
): Promise<Response | null> {
  if (recentlyAuthorised(ctx, request, repo)) return null;
  const probe = concat([
    encodePkt("command=ls-refs\n"),
    ...capabilities.map((line) => encodePkt(line + "\n")),
    DELIM_PKT,
    encodePkt("ref-prefix refs/gitedge-authorisation-probe/\n"),
    FLUSH_PKT,
  ]);
  const headers = forwardHeaders(request.headers);
  headers.set("git-protocol", "version=2");
  headers.set("content-type", UPLOAD_PACK_REQUEST_TYPE);
  headers.delete("content-encoding");
  const origin = await fromOrigin(ctx, `${repo.originUrl}/git-upload-pack`, {
    method: "POST",
    headers,
    body: probe as Uint8Array<ArrayBuffer>,
  });
  noteOriginVerdict(ctx, request, repo, origin.status);
  if (origin.status !== 200) return relay(origin, origin.body);
  await origin.body?.cancel().catch(() => {});
  return null;
}

/**
 * `GET /_edge/bundle-list/<repo>`: the same list in git's config format, for
 * `git clone --bundle-uri=<this URL>`, which records it (`fetch.bundleURI`) so that each later
 * `git fetch` reads it again and downloads only the bundles newer than the newest it applied
 * (`fetch.bundleCreationToken`). Unsigned and long-lived (the bundle URLs in it are signed
 * afresh on each read), so it is given only to clients the origin lets read the repository; 404
 * while the edge has no bundles for it.
 */
export async function handleBundleListGet(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  url: URL,
): Promise<Response> {
  const servable = await servableBundles(ctx, repo);
  if (!servable) {
    return new Response("gitedge: no bundles for this repository\n", {
      status: 404,
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
  }
  const { format } = servable;
  const capabilities = format === "sha1" ? [] : [`object-format=${format}`];
  const refused = await refusedByOrigin(ctx, request, repo, capabilities);
  if (refused) return refused;
  const body = await signedList(ctx, repo, url, servable.bundles, bundleListConfig);
  return new Response(body, {
    status: 200,
    headers: { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" },
  });
}

/**
 * Whether the edge advertises `bundle-uri` for `repo`: its snapshot in force has bundles. A
 * coordinator that cannot answer means no (the advertisement is the origin's, as before).
 */
export async function offersBundles(ctx: ProxyContext, repo: RepoRef): Promise<boolean> {
  try {
    const manifest = await ctx.deps.coordinator.manifest(repo);
    return manifest !== null && layerBundles(manifest).length > 0;
  } catch {
    return false;
  }
}

/**
 * The edge's `bundle-uri` answer for `repo` (made when called), or null when the snapshot in
 * force has no bundles or a pack of it is missing.
 */
export async function bundleList(
  ctx: ProxyContext,
  repo: RepoRef,
  url: URL,
): Promise<(() => Promise<Response>) | null> {
  const servable = await servableBundles(ctx, repo);
  if (!servable) return null;
  return async () => {
    const body = await signedList(ctx, repo, url, servable.bundles, bundleListAnswer);
    return new Response(body as Uint8Array<ArrayBuffer>, {
      status: 200,
      headers: {
        "content-type": UPLOAD_PACK_RESULT_TYPE,
        "cache-control": "no-cache",
      },
    });
  };
}

/** A copy of `adv` that also advertises capability `key` (unchanged if it does already). */
export function withCapability(
  adv: CapabilityAdvertisement,
  key: string,
): CapabilityAdvertisement {
  if (adv.capabilities.some((c) => c.key === key)) return adv;
  return { capabilities: [...adv.capabilities, { key }] };
}

/** The bundles of the snapshot in force and its object format, or null (none, or a pack missing). */
async function servableBundles(ctx: ProxyContext, repo: RepoRef) {
  const { manifest, missingPack } = await currentSnapshot(ctx, repo);
  const bundles = manifest && !missingPack ? layerBundles(manifest) : [];
  if (bundles.length === 0) return null;
  return { bundles, format: manifest!.objectFormat ?? "sha1" };
}

/** `bundles` listed by `render` (either wire form) with URLs signed now; counted. */
async function signedList<T>(
  ctx: ProxyContext,
  repo: RepoRef,
  url: URL,
  bundles: ReturnType<typeof layerBundles>,
  render: (...args: Parameters<typeof bundleListAnswer>) => Promise<T>,
): Promise<T> {
  const now = Math.floor(ctx.deps.clock.now() / 1000);
  const body = await render(
    ctx.signer,
    publicBase(ctx, url),
    repo.id,
    bundles,
    now,
    ctx.deps.config.urlTtlSeconds,
  );
  ctx.metrics.inc("gitedge_bundle_lists_total");
  return body;
}
