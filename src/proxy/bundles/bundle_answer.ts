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
import type { Pkt } from "../../git/pktline.ts";
import type { ObjectFormat } from "../../git/object_id.ts";
import { authorisedToFetch } from "../origin/fetch_probe.ts";
import { UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";

/**
 * The edge's answer to the `bundle-uri` request whose command and capability lines are `head`,
 * or null when the edge has no list for `repo` (the request then goes to the origin as sent).
 * Only a client the origin lets fetch the repository gets the list (fetch_probe.ts: the memo, or
 * a probe fetch of the snapshot's tips); a refusal is relayed as the origin sent it.
 */
export async function answerBundleUri(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  url: URL,
  _head: readonly Pkt[],
): Promise<Response | null> {
  // A coordinator that cannot answer leaves the request to the origin, as when cold.
  const servable = await servableBundles(ctx, repo).catch(() => null);
  if (!servable) return null;
  const verdict = await authorisedToFetch(ctx, request, repo, servable.tips, servable.format);
  if (verdict instanceof Response) return verdict;
  if (verdict !== "authorised") return null;
  return await listAnswer(ctx, repo, url, servable);
}

/**
 * `GET /_edge/bundle-list/<repo>`: the same list in git's config format, for
 * `git clone --bundle-uri=<this URL>`, which records it (`fetch.bundleURI`) so that each later
 * `git fetch` reads it again and downloads only the bundles newer than the newest it applied
 * (`fetch.bundleCreationToken`). Unsigned and long-lived (the bundle URLs in it are signed
 * afresh on each read), so it is given only to clients the origin lets fetch the repository.
 * The origin is asked first, whatever the edge holds (a probe fetch of the snapshot's tips, of
 * none without one): a caller it refuses gets its refusal, the same whether the edge has bundles
 * for the repository or not; 404 only to a caller the origin lets fetch, while the edge has none.
 */
export async function handleBundleListGet(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  url: URL,
): Promise<Response> {
  const servable = await servableBundles(ctx, repo);
  const verdict = await authorisedToFetch(
    ctx,
    request,
    repo,
    servable?.tips ?? [],
    servable?.format ?? "sha1",
  );
  if (verdict instanceof Response) return verdict;
  if (!servable || verdict !== "authorised") {
    return new Response("gitedge: no bundles for this repository\n", {
      status: 404,
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
  }
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

/** The edge's `bundle-uri` answer listing `servable`'s bundles, with URLs signed now. */
async function listAnswer(
  ctx: ProxyContext,
  repo: RepoRef,
  url: URL,
  servable: Servable,
): Promise<Response> {
  const body = await signedList(ctx, repo, url, servable.bundles, bundleListAnswer);
  return new Response(body as Uint8Array<ArrayBuffer>, {
    status: 200,
    headers: {
      "content-type": UPLOAD_PACK_RESULT_TYPE,
      "cache-control": "no-cache",
    },
  });
}

/** A copy of `adv` that also advertises capability `key` (unchanged if it does already). */
export function withCapability(
  adv: CapabilityAdvertisement,
  key: string,
): CapabilityAdvertisement {
  if (adv.capabilities.some((c) => c.key === key)) return adv;
  return { capabilities: [...adv.capabilities, { key }] };
}

interface Servable {
  bundles: ReturnType<typeof layerBundles>;
  format: ObjectFormat;
  /** The snapshot's tips (what a probe fetch names). */
  tips: string[];
}

/**
 * The bundles of the snapshot in force, its object format and tips, or null (none, or a pack
 * missing).
 */
async function servableBundles(ctx: ProxyContext, repo: RepoRef): Promise<Servable | null> {
  const { manifest, missingPack } = await currentSnapshot(ctx, repo);
  const bundles = manifest && !missingPack ? layerBundles(manifest) : [];
  if (bundles.length === 0) return null;
  return {
    bundles,
    format: manifest!.objectFormat ?? "sha1",
    tips: [...new Set(Object.values(manifest!.tips))],
  };
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
