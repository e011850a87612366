/**
 * The tag digest of a cached fetch (`cached_fetch.ts`) taken from the clone's own `ls-refs`. A
 * `--depth 1` clone asks `ls-refs` (with `peel` and `ref-prefix refs/tags/`), then a fetch with
 * `include-tag`; the response cache's key for that fetch needs a digest of the origin's tags, and
 * asking the origin for them again costs the cache hit one more WAN round trip. The edge relays
 * the clone's `ls-refs` anyway: as each answer passes, the tags it lists are digested, and a
 * fetch of the same credential uses the digest of the newest answer the origin gave it.
 *
 * Freshness: a clone's fetch follows its own `ls-refs`, whose answer the origin computed after
 * the clone began (sent ahead with its `info/refs`, or asked when it came). The newest answer (by
 * when the edge asked the origin for it) is at least that recent, so the digest is the origin's
 * tags at some moment of that clone. It is used only when that newest answer listed every tag
 * (an answer listing fewer, or one cut short, leaves no digest: the edge asks the origin as
 * before), within the `--ls-refs-ahead` bound of when it was asked, and within `--auth-ttl`
 * (the answer is also the origin's word that the credential may read the repository). The
 * digest is recorded before the answer's last packet goes to its client, so the client cannot
 * send its fetch first. Per process (per isolate on Workers), keyed by the credential memo's
 * salted hash, at most {@link MAX_ENTRIES} credentials.
 */
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext, TagListingHooks } from "../core/context.ts";
import { sha256 } from "@noble/hashes/sha2.js";
import { parseCommandRequest } from "../../git/command_request.ts";
import { type LsRefsArgs, parseLsRefsArgs } from "../../git/ls_refs.ts";
import { parsePktLength, type Pkt } from "../../git/pktline.ts";
import { toHex } from "../../git/object_id.ts";

/** Credentials whose newest listing is kept (oldest dropped first). */
export const MAX_ENTRIES = 256;
/** Larger tag listings are not digested here (the fetch asks the origin). */
export const MAX_TAG_BYTES = 16 << 20;

interface Listing {
  /** When the edge asked the origin for this answer (ms). */
  askedAt: number;
  /** Its digest of the tags, or null when it did not list them all. */
  digest: string | null;
}

/** The newest `ls-refs` answer per credential and repository, of one process. */
export class TagListings implements TagListingHooks {
  readonly #newest = new Map<string, Listing>();

  /**
   * `response` answers the `ls-refs` whose packets are `read`; the edge asked the origin for it
   * at `askedAt` (ms). Returns it with a body that records, as it passes, whether and which
   * tags it listed.
   */
  observe(
    ctx: ProxyContext,
    request: Request,
    repo: RepoRef,
    read: Pkt[],
    askedAt: number,
    response: Response,
  ): Response {
    if (response.status !== 200 || !response.body) return response;
    const key = ctx.authMemo.key(repo.id, request.headers.get("authorization"));
    const digest = listsEveryTag(read) ? new TagDigest() : null;
    let ended = false;
    const record = (value: string | null) => {
      const had = this.#newest.get(key);
      if (had && had.askedAt > askedAt) return;
      this.#newest.delete(key);
      this.#newest.set(key, { askedAt, digest: value });
      while (this.#newest.size > MAX_ENTRIES) {
        this.#newest.delete(this.#newest.keys().next().value!);
      }
    };
    const body = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          if (!ended) {
            // The listing's digest (or its absence) is on record before its final packet
            // reaches the client.
            if (digest === null) {
              ended = true;
              record(null);
            } else if (digest.push(chunk)) {
              ended = true;
              record(digest.value());
            }
          }
          controller.enqueue(chunk);
        },
        flush() {
          // Ended without its final flush (or with bytes after it): no digest from it.
          if (!ended || digest?.failed) record(null);
        },
      }),
    );
    return new Response(body, { status: response.status, headers: response.headers });
  }

  /**
   * The digest of the origin's tags from the newest `ls-refs` answer the origin gave this
   * credential for `repo`, if that answer listed every tag and is recent enough; else null.
   */
  digest(ctx: ProxyContext, request: Request, repo: RepoRef): string | null {
    const listing = this.#newest.get(
      ctx.authMemo.key(repo.id, request.headers.get("authorization")),
    );
    if (!listing || listing.digest === null) return null;
    const config = ctx.deps.config;
    const bound = Math.min(
      config.lsRefsAheadSeconds,
      config.authTtlSeconds,
    ) * 1000;
    const age = ctx.deps.clock.now() - listing.askedAt;
    if (bound <= 0 || age < 0 || age > bound) return null;
    ctx.metrics.inc("gitedge_tag_digest_total", 1, { source: "ls-refs" });
    return listing.digest;
  }
}

/** Whether an `ls-refs` request lists every tag, peeled: what the digest needs. */
export function listsEveryTag(read: Pkt[]): boolean {
  let args: LsRefsArgs;
  try {
    const req = parseCommandRequest(read);
    if (req.command !== "ls-refs") return false;
    args = parseLsRefsArgs(req.args);
  } catch {
    return false;
  }
  // An argument this edge does not know might narrow the listing.
  return args.peel && args.other.length === 0 &&
    (args.refPrefixes.length === 0 || args.refPrefixes.some((p) => "refs/tags/".startsWith(p)));
}

/**
 * A digest of the tags an `ls-refs` answer lists (`<oid> refs/tags/<name> [peeled:<oid>]`,
 * sorted, other attributes dropped), fed in pieces. The same tags give the same digest whatever
 * else the listing held, so a clone's listing and the edge's own `ls-refs` of tags agree.
 */
export class TagDigest {
  #buffer = new Uint8Array(0);
  #lines: string[] = [];
  #bytes = 0;
  #done = false;
  /** A malformed or oversized listing, or bytes after its end: no digest. */
  failed = false;

  /** Feeds the next piece; true once the listing's final flush has been read. */
  push(chunk: Uint8Array): boolean {
    if (this.#done) {
      if (chunk.byteLength > 0) this.failed = true;
      return true;
    }
    const buf = new Uint8Array(this.#buffer.byteLength + chunk.byteLength);
    buf.set(this.#buffer);
    buf.set(chunk, this.#buffer.byteLength);
    let at = 0;
    try {
      while (buf.byteLength - at >= 4) {
        const length = parsePktLength(buf.subarray(at, at + 4));
        if (length === 0) {
          this.#done = true;
          if (at + 4 < buf.byteLength) this.failed = true;
          this.#buffer = new Uint8Array(0);
          return true;
        }
        if (length < 4) throw new Error("no special packet but flush in a listing");
        if (buf.byteLength - at < length) break;
        this.#line(new TextDecoder().decode(buf.subarray(at + 4, at + length)));
        at += length;
      }
    } catch {
      this.failed = true;
      this.#done = true;
      return true;
    }
    this.#buffer = buf.slice(at);
    return false;
  }

  #line(text: string): void {
    const [oid, name, ...attrs] = text.replace(/\n$/, "").split(" ");
    if (!name?.startsWith("refs/tags/")) return;
    const peeled = attrs.find((a) => a.startsWith("peeled:")) ?? "";
    const line = `${oid} ${name} ${peeled}`;
    this.#bytes += line.length + 1;
    if (this.#bytes > MAX_TAG_BYTES) throw new Error("tag listing too large");
    this.#lines.push(line);
  }

  /** The digest, or null when the listing was malformed, oversized or not ended. */
  value(): string | null {
    if (this.failed || !this.#done) return null;
    const hash = sha256.create();
    hash.update(new TextEncoder().encode([...this.#lines].sort().join("\n")));
    return toHex(hash.digest());
  }
}
