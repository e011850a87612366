/**
 * `ls-refs` sent ahead: a v2 clone asks `GET info/refs`, then `ls-refs`, one WAN round trip after
 * the other. When the edge relays a v2 `info/refs` of the upload-pack service, it also sends the
 * origin, at once and with the same credentials, the `ls-refs` the same credential last sent for
 * that repository with the same User-Agent (same arguments and capabilities, less `agent=`). When
 * the client's own `ls-refs` follows with the same credential and the same request within
 * `lsRefsAheadSeconds`, it gets that answer: the two origin calls overlap, and the clone's refs
 * cost one WAN round trip instead of two.
 *
 * Whose request: a request is learned only from an `ls-refs` the origin answered 200 for that
 * very credential (keyed by the credential memo's salted hash), so the origin never gets, under
 * one credential, a request another caller wrote; and it is sent ahead only while the memo holds
 * the credential accepted (with `--auth-ttl` 0: until the origin refuses it), so an `info/refs`
 * of a credential the origin refused sends nothing ahead. Anonymous requests to repositories the
 * origin does not serve hold nothing after their answer.
 *
 * Used or not sent: a request is sent ahead only while the prediction holds. After an `ls-refs`
 * that differs from what was learned (a `git fetch` after clones asks other prefixes), nothing is
 * sent ahead for that credential until the same request comes twice in a row. After a partial
 * fetch (a `filter`), the credential's next `info/refs` sends nothing ahead: it is most likely a
 * lazy fetch of the missing objects, which lists no refs.
 *
 * Freshness: the answer was computed by the origin after the clone's first request reached the
 * edge, never before, so it cannot hide a change made before the clone started; it is handed out
 * to the requests it was made for (same credential), and only within the bound. The next
 * `info/refs` of the credential makes it serve nobody (it predates that clone): once it was
 * answered, that `info/refs` sends its own, which serves both clones; while it is still under
 * way, nothing more is sent until it is answered, and then one follow-up for every clone that
 * came meanwhile (a burst of clones costs the origin two `ls-refs`, not one each, and no clone
 * gets an answer older than itself; an `ls-refs` that comes before the follow-up goes to the
 * origin).
 *
 * Checked like every origin answer: only a status 200 of the upload-pack result type whose body
 * is well-formed pkt-lines ending in a flush (no `ERR`) is used; anything else (an answer cut
 * short, garbage) costs the client nothing: its own `ls-refs` goes to the origin as usual.
 *
 * Bounded in entries and in bytes: at most {@link MAX_LEARNED} requests of at most
 * {@link MAX_LEARNED_REQUEST_BYTES} each and {@link MAX_LEARNED_BYTES} in all, and at most
 * {@link MAX_ENTRIES} answers of at most {@link MAX_ANSWER_BYTES} each and
 * {@link MAX_ANSWERS_BYTES} in all. Credentials stay in memory only as the memo's salted hash.
 */
import { AGENT } from "../../version.ts";
import type { RepoRef } from "../core/repo.ts";
import type { LsRefsAheadHooks, ProxyContext } from "../core/context.ts";
import { forwardHeaders } from "./origin.ts";
import { fromOrigin, noteOriginVerdict } from "./forwarding.ts";
import { type Pkt, type PktLineReader, pktSpans } from "../../git/pktline.ts";
import { parseCommandRequest, serializeCommandRequest } from "../../git/command_request.ts";
import { RequestTooLargeError } from "../core/errors.ts";
import { UPLOAD_PACK_REQUEST_TYPE, UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";
import { inBackground } from "../core/deps.ts";

/** An `info/refs` this soon after its client's `ls-refs` sends nothing ahead (ms). */
const EARLY_MS = 500;
/** An `info/refs` this soon after a partial fetch of its credential sends nothing ahead (ms). */
export const LAZY_MS = 600_000;
/** A credential the origin refused gets nothing sent ahead for this long (ms). */
const REFUSED_MS = 600_000;
/** Answers kept at once (oldest dropped first). */
export const MAX_ENTRIES = 64;
/** Larger answers are not kept (the client's `ls-refs` then goes to the origin). */
export const MAX_ANSWER_BYTES = 1 << 20;
/** All answers kept (or under way, counted at their bound) at once. */
export const MAX_ANSWERS_BYTES = 8 << 20;
/** Requests learned at once (oldest dropped first). */
export const MAX_LEARNED = 4096;
/** Larger requests are not read, nor learned (a clone's `ls-refs` is a few hundred bytes). */
export const MAX_LEARNED_REQUEST_BYTES = 16 * 1024;
/** All requests learned, in bytes. */
export const MAX_LEARNED_BYTES = 1 << 20;

interface Answer {
  status: number;
  contentType: string | null;
  bytes: Uint8Array;
}

interface Learned {
  /** The request, normalised ({@link requestKey}). */
  key: string;
  /** The request as sent ahead ({@link withAgent}). */
  body: Uint8Array;
  /** Whether it is sent ahead: learned first, or came twice in a row. */
  trusted: boolean;
  /** When the origin last answered this credential's own `ls-refs` with 200 (ms). */
  at: number;
}

interface Entry {
  at: number;
  request: string;
  answer: Promise<Answer | null>;
  /** The `info/refs` it stands for whose `ls-refs` has not come yet (this one's and earlier). */
  clones: number;
  /** Whether its answer came (or failed). */
  settled: boolean;
  /** `info/refs` that came while it was under way: it serves none of them (nor its own). */
  followUps: number;
  /** The last of those, whose credentials the follow-up is sent with. */
  next?: { request: Request; repo: RepoRef };
}

/** The requests learned and the answers under way, of one process. */
export class LsRefsAhead implements LsRefsAheadHooks {
  /**
   * (credential memo key, client's User-Agent) → the last `ls-refs` request that credential sent
   * and the origin answered 200: git clone, git fetch and `gitedge clone` each ask their own.
   */
  readonly #learned = new Map<string, Learned>();
  #learnedBytes = 0;
  /** Bytes of the answers in {@link #ahead}, each counted at {@link MAX_ANSWER_BYTES}. */
  #aheadBytes = 0;
  /** credential memo key → the answer sent ahead for it. */
  readonly #ahead = new Map<string, Entry>();
  /** credential memo key → when the origin last refused an `ls-refs` sent ahead (ms). */
  readonly #refused = new Map<string, number>();
  /** credential memo key → when an `ls-refs` found nothing sent ahead (ms). */
  readonly #early = new Map<string, number>();
  /** credential memo key → when its last v2 `info/refs` came (ms). */
  readonly #infoRefs = new Map<string, number>();
  /**
   * credential memo key → when its last partial `fetch` came (ms): the next `info/refs` of that
   * credential is likely a lazy fetch's, which sends no `ls-refs`.
   */
  readonly #partial = new Map<string, number>();

  /**
   * On a v2 `fetch` with a `filter` (a partial clone, or one of its lazy fetches): the next
   * `info/refs` of that credential within {@link LAZY_MS} sends nothing ahead. A partial clone's
   * checkout (and every later command that needs a blob) fetches the missing objects by id:
   * `info/refs` then `fetch`, no `ls-refs`, so a listing sent ahead for it would go unused.
   */
  partialFetch(ctx: ProxyContext, request: Request, repo: RepoRef): void {
    if (boundMs(ctx) <= 0) return;
    const key = ctx.authMemo.key(repo.id, request.headers.get("authorization"));
    remember(this.#partial, key, ctx.deps.clock.now());
  }

  /**
   * On a v2 `info/refs` of the upload-pack service: sends the learned `ls-refs` of `repo` to the
   * origin with `request`'s credentials, unless nothing is learned yet or the bound is 0.
   */
  start(ctx: ProxyContext, request: Request, repo: RepoRef): void {
    if (boundMs(ctx) <= 0) return;
    const key = ctx.authMemo.key(repo.id, request.headers.get("authorization"));
    // An answer sent ahead for an earlier info/refs predates this clone: whatever this one does,
    // that answer goes to no `ls-refs` from now on. The clones it was for get a newer answer
    // instead, if this one sends any (concurrent clones of one credential each get theirs).
    const prior = this.#ahead.get(key);
    const now = ctx.deps.clock.now();
    const live = prior && now - prior.at <= boundMs(ctx) ? prior : undefined;
    remember(this.#infoRefs, key, now);
    // Likely a lazy fetch (a partial fetch came before): nothing sent ahead, once.
    const partial = this.#partial.get(key);
    this.#partial.delete(key);
    if (partial !== undefined && now - partial <= LAZY_MS) {
      this.#dropAhead(key);
      return;
    }
    const learned = this.#sendable(ctx, request, key);
    if (learned && live && !live.settled && live.request === learned.key) {
      // Still under way: one more is sent when it is answered, for this clone and the others
      // that came meanwhile (a burst of clones costs the origin two, not one each).
      live.followUps++;
      live.next = { request, repo };
      return;
    }
    this.#dropAhead(key);
    if (learned) this.#send(ctx, request, repo, key, learned, (live?.clones ?? 0) + 1);
  }

  /** The request to send ahead for this `info/refs`, or null when nothing is to be sent. */
  #sendable(ctx: ProxyContext, request: Request, key: string): Learned | null {
    const learned = this.#learned.get(learnedKey(key, request));
    if (!learned?.trusted) return null;
    // Only for a credential whose own listing the origin answered within --auth-ttl: one it
    // refused since gets nothing sent ahead (its listing goes to the origin and is learned again).
    const ttlMs = ctx.deps.config.authTtlSeconds * 1000;
    if (ttlMs > 0 && ctx.deps.clock.now() - learned.at > ttlMs) return null;
    // A client that sends its `ls-refs` with its `info/refs` (gitedge clone) may have had it
    // answered already: nothing to send ahead for it.
    const early = this.#early.get(key);
    this.#early.delete(key);
    if (early !== undefined && ctx.deps.clock.now() - early < EARLY_MS) return null;
    // git asks anonymously first and again with credentials after a 401: a credential (or none)
    // the origin refused lately gets nothing sent ahead.
    const refused = this.#refused.get(key);
    if (refused !== undefined && ctx.deps.clock.now() - refused < REFUSED_MS) return null;
    return learned;
  }

  /** Sends `learned` to the origin with `request`'s credentials, for `clones` clones. */
  #send(
    ctx: ProxyContext,
    request: Request,
    repo: RepoRef,
    key: string,
    learned: Learned,
    clones: number,
  ): void {
    const headers = forwardHeaders(request.headers);
    headers.set("content-type", UPLOAD_PACK_REQUEST_TYPE);
    headers.set("accept", UPLOAD_PACK_RESULT_TYPE);
    const entry: Entry = {
      at: ctx.deps.clock.now(),
      request: learned.key,
      answer: Promise.resolve(null),
      clones,
      settled: false,
      followUps: 0,
    };
    const answer = (async (): Promise<Answer | null> => {
      const res = await fromOrigin(ctx, `${repo.originUrl}/git-upload-pack`, {
        method: "POST",
        headers,
        body: learned.body as Uint8Array<ArrayBuffer>,
      });
      if (res.status !== 200 || !res.body) {
        await res.body?.cancel();
        this.#refused.delete(key);
        this.#refused.set(key, ctx.deps.clock.now());
        while (this.#refused.size > MAX_ENTRIES) {
          this.#refused.delete(this.#refused.keys().next().value!);
        }
        return null;
      }
      const chunks: Uint8Array[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += chunk.byteLength;
        if (size > MAX_ANSWER_BYTES) return null;
        chunks.push(chunk);
      }
      const bytes = new Uint8Array(size);
      let at = 0;
      for (const c of chunks) {
        bytes.set(c, at);
        at += c.byteLength;
      }
      const contentType = res.headers.get("content-type");
      if (contentType !== UPLOAD_PACK_RESULT_TYPE || !wellFormedListing(bytes)) return null;
      return { status: res.status, contentType, bytes };
    })().catch(() => null).then((result) => {
      entry.settled = true;
      // Clones whose info/refs came while it was under way: it may predate them, so it serves
      // nobody; one more, sent now, serves them and the clones this one was for.
      if (entry.followUps > 0 && this.#ahead.get(key) === entry && entry.next) {
        this.#dropAhead(key);
        const again = this.#learned.get(learnedKey(key, entry.next.request));
        if (result && again?.key === entry.request) {
          this.#send(
            ctx,
            entry.next.request,
            entry.next.repo,
            key,
            again,
            entry.clones + entry.followUps,
          );
        }
      }
      entry.next = undefined;
      return result;
    });
    entry.answer = answer;
    inBackground(ctx.deps, answer);
    this.#ahead.set(key, entry);
    this.#aheadBytes += MAX_ANSWER_BYTES;
    while (this.#ahead.size > MAX_ENTRIES || this.#aheadBytes > MAX_ANSWERS_BYTES) {
      this.#dropAhead(this.#ahead.keys().next().value!);
    }
  }

  /** Bytes held: requests learned and answers sent ahead (each counted at its bound). */
  heldBytes(): number {
    return this.#learnedBytes + this.#aheadBytes;
  }

  #dropAhead(key: string): void {
    if (this.#ahead.delete(key)) this.#aheadBytes -= MAX_ANSWER_BYTES;
  }

  /** Learns `read` as what `memoKey` asks with `request`'s User-Agent (the origin said 200). */
  #learn(memoKey: string, request: Request, key: string, read: Pkt[], now: number): void {
    const at = learnedKey(memoKey, request);
    const prior = this.#learned.get(at);
    if (prior) {
      this.#learned.delete(at);
      this.#learnedBytes -= prior.body.byteLength;
    }
    const body = withAgent(read);
    // A request unlike the last one is sent ahead only once it comes again.
    this.#learned.set(at, { key, body, trusted: !prior || prior.key === key, at: now });
    this.#learnedBytes += body.byteLength;
    while (this.#learned.size > MAX_LEARNED || this.#learnedBytes > MAX_LEARNED_BYTES) {
      const oldest = this.#learned.keys().next().value!;
      this.#learnedBytes -= this.#learned.get(oldest)!.body.byteLength;
      this.#learned.delete(oldest);
    }
  }

  /**
   * For an `ls-refs` whose command and capability packets are `head`: reads its arguments (within
   * `budget`) and answers it with the answer sent ahead for it, if any; else returns every packet
   * read, to be forwarded as the client sent them. Learns the request either way.
   */
  async answer(
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
    learn?: (status: number) => void;
  }> {
    let read = head;
    // Requests beyond what could be learned (nothing larger is ever sent ahead) are not read
    // further here: the rest streams to the origin as it came, never parsed or held.
    let size = head.reduce((n, p) => n + (p.type === "data" ? p.data.length + 4 : 4), 0);
    if (size > MAX_LEARNED_REQUEST_BYTES) return { response: null, read };
    if (head.at(-1)?.type === "delim") {
      const args: Pkt[] = [];
      for (;;) {
        const pkt = await reader.read();
        if (pkt === null) break;
        const n = pkt.type === "data" ? pkt.data.length + 4 : 4;
        budget.left -= n;
        if (budget.left < 0) {
          throw new RequestTooLargeError(`request body exceeds ${budget.max} bytes`);
        }
        args.push(pkt);
        size += n;
        if (pkt.type === "flush") break;
        if (size > MAX_LEARNED_REQUEST_BYTES) return { response: null, read: [...head, ...args] };
      }
      read = [...head, ...args];
    }
    const complete = read.at(-1)?.type === "flush" && await reader.peek() === null;
    if (!complete) return { response: null, read };
    const key = requestKey(read);
    if (key === null) return { response: null, read };
    const memoKey = ctx.authMemo.key(repo.id, request.headers.get("authorization"));
    // Learned once the origin answers this credential 200 (by the caller, for a forwarded one).
    const learn = (status: number) => {
      if (status === 200) this.#learn(memoKey, request, key, read, ctx.deps.clock.now());
    };
    const entry = this.#ahead.get(memoKey);
    if (!entry) {
      // Nothing ahead and no info/refs just before: a client that sends its ls-refs with its
      // info/refs. (One that came after its info/refs, as git's do, marks nothing: else the next
      // clone, if it starts within EARLY_MS, would get nothing ahead either, and so on.)
      const infoRefs = this.#infoRefs.get(memoKey);
      if (infoRefs === undefined || ctx.deps.clock.now() - infoRefs >= EARLY_MS) {
        remember(this.#early, memoKey, ctx.deps.clock.now());
      }
      return { response: null, read, learn };
    }
    if (entry.followUps > 0) {
      // Clones came after it was sent: this may be one of them. It goes to the origin, and the
      // follow-up stands for one clone fewer.
      entry.followUps--;
      ctx.metrics.inc("gitedge_ls_refs_ahead_total", 1, { result: "unused" });
      return { response: null, read, learn };
    }
    // It serves as many `ls-refs` as there were `info/refs` since it (or the one it replaced) was
    // sent; each was answered after its own clone's `info/refs`, never before.
    if (--entry.clones <= 0) this.#dropAhead(memoKey);
    const age = ctx.deps.clock.now() - entry.at;
    if (entry.request !== key || age < 0 || age > boundMs(ctx)) {
      ctx.metrics.inc("gitedge_ls_refs_ahead_total", 1, { result: "unused" });
      return { response: null, read, learn };
    }
    const answer = await entry.answer;
    if (!answer) {
      ctx.metrics.inc("gitedge_ls_refs_ahead_total", 1, { result: "failed" });
      return { response: null, read, learn };
    }
    ctx.metrics.inc("gitedge_ls_refs_ahead_total", 1, { result: "used" });
    noteOriginVerdict(ctx, request, repo, answer.status);
    learn(answer.status);
    const headers = new Headers({ "cache-control": "no-cache" });
    if (answer.contentType) headers.set("content-type", answer.contentType);
    return {
      response: new Response(answer.bytes as Uint8Array<ArrayBuffer>, { status: 200, headers }),
      read,
      askedAt: entry.at,
    };
  }
}

/** Sets `key` to `value` as the newest of `map`, which keeps at most {@link MAX_ENTRIES}. */
function remember(map: Map<string, number>, key: string, value: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > MAX_ENTRIES) map.delete(map.keys().next().value!);
}

/** The credential memo key (repository and credential) and the client's User-Agent. */
function learnedKey(memoKey: string, request: Request): string {
  return `${memoKey}\n${request.headers.get("user-agent") ?? ""}`;
}

/**
 * Whether `bytes` is an `ls-refs` answer as git writes one: data pkt-lines (no `ERR`) ending in
 * a flush, nothing after it.
 */
export function wellFormedListing(bytes: Uint8Array): boolean {
  try {
    let flushAt = -1;
    for (const { pkt, end } of pktSpans(bytes)) {
      if (flushAt >= 0) return false;
      if (pkt.type === "flush") flushAt = end;
      else if (pkt.type !== "data") return false;
      else if (new TextDecoder().decode(pkt.data.subarray(0, 4)) === "ERR ") return false;
    }
    return flushAt === bytes.byteLength;
  } catch {
    return false;
  }
}

/** The bound in ms (`lsRefsAheadSeconds`). */
function boundMs(ctx: ProxyContext): number {
  return ctx.deps.config.lsRefsAheadSeconds * 1000;
}

/** What makes two `ls-refs` requests the same: command, capabilities less `agent=`, arguments. */
function requestKey(pkts: Pkt[]): string | null {
  try {
    const req = parseCommandRequest(pkts);
    if (req.command !== "ls-refs") return null;
    return JSON.stringify([
      req.capabilities.filter((c) => !c.startsWith("agent=")).sort(),
      req.args,
    ]);
  } catch {
    return null;
  }
}

/** The request as the edge sends it ahead: the client's, with the edge's agent. */
function withAgent(pkts: Pkt[]): Uint8Array {
  const req = parseCommandRequest(pkts);
  return serializeCommandRequest({
    command: req.command,
    capabilities: [AGENT, ...req.capabilities.filter((c) => !c.startsWith("agent="))],
    args: req.args,
  });
}
