/**
 * What every route shares: the injected dependencies and the per-process (or per-isolate) state
 * `createApp` builds once.
 */
import type { EdgeDeps } from "./deps.ts";
import type { ResolvedEdgeConfig } from "./config.ts";
import type { RepoRef } from "./repo.ts";
import type { Metrics } from "./metrics.ts";
import type { UrlSigner } from "./signing.ts";
import type { AuthMemo } from "../origin/auth_memo.ts";
import type { CacheFills } from "./response_cache.ts";
import type { ParseBudget } from "./parse_budget.ts";
import type { Pkt, PktLineReader } from "../../git/pktline.ts";
import type { RepoRegistry } from "../ops/repo_registry.ts";
import type { RequestRecord } from "./request_record.ts";

export interface ProxyContext {
  /** As given to `createApp`, the config with its defaults filled in. */
  deps: EdgeDeps & { config: ResolvedEdgeConfig };
  metrics: Metrics;
  signer: UrlSigner;
  /** Credentials the origin recently accepted, per repository (hashes, in memory). */
  authMemo: AuthMemo;
  /** Fills under way of the response cache (its entries live in the store). */
  cacheFills: CacheFills;
  /** What origins advertised, as last seen by this instance (absent: nothing is known). */
  originFeatures?: OriginFeatures;
  /** Bytes of client requests being parsed at once. */
  parseBudget: ParseBudget;
  /** The repositories the edge knows, their traffic and pins (absent: nothing is recorded). */
  registry?: RepoRegistry;
  /** `ls-refs` sent to the origin alongside `info/refs` (absent: never). */
  lsRefsAhead?: LsRefsAheadHooks;
  /** What this request's handling did (absent outside a request: builds, background work). */
  record?: RequestRecord;
  /** The tags each credential's newest `ls-refs` answer listed (absent: never used). */
  tagListings?: TagListingHooks;
  /** Whether a snapshot build may start now (absent: always): not while the store is full. */
  admitBuild?: (repo: RepoRef) => boolean | Promise<boolean>;
}

/** What the routes call of `LsRefsAhead` (ls_refs_ahead.ts). */
export interface LsRefsAheadHooks {
  start(ctx: ProxyContext, request: Request, repo: RepoRef): void;
  /** A partial clone's `fetch` (a `filter`): its lazy fetch's `info/refs` lists no refs. */
  partialFetch?(ctx: ProxyContext, request: Request, repo: RepoRef): void;
  answer(
    ctx: ProxyContext,
    request: Request,
    repo: RepoRef,
    head: Pkt[],
    reader: PktLineReader,
    budget: { left: number; max: number },
  ): Promise<{
    response: Response | null;
    read: Pkt[];
    askedAt?: number;
    /** To call with the origin's status once the `ls-refs` was forwarded to it. */
    learn?: (status: number) => void;
  }>;
}

/** What the routes call of `TagListings` (tag_listings.ts). */
export interface TagListingHooks {
  observe(
    ctx: ProxyContext,
    request: Request,
    repo: RepoRef,
    read: Pkt[],
    askedAt: number,
    response: Response,
  ): Response;
  digest(ctx: ProxyContext, request: Request, repo: RepoRef): string | null;
}

/**
 * The `fetch` features each repository's origin advertised in its last v2 advertisement this
 * instance relayed; bounded, oldest forgotten first. Not knowing means "not advertised".
 */
export class OriginFeatures {
  readonly #seen = new Map<string, ReadonlySet<string>>();
  constructor(readonly maxRepos = 4096) {}

  remember(repo: RepoRef, features: readonly string[]): void {
    this.#seen.delete(repo.id);
    this.#seen.set(repo.id, new Set(features));
    if (this.#seen.size > this.maxRepos) this.#seen.delete(this.#seen.keys().next().value!);
  }

  advertises(repo: RepoRef, feature: string): boolean {
    return this.#seen.get(repo.id)?.has(feature) ?? false;
  }
}

/** The edge's public base URL: `--public-url`, else the origin of the request's own URL. */
export function publicBase(ctx: ProxyContext, url: URL): string {
  return (ctx.deps.config.publicUrl ?? url.origin).replace(/\/+$/, "");
}
