/**
 * A seeded fuzz of the edge's real HTTP handler (`createApp(deps)`, called in-process with
 * `app.fetch`): mutated real git requests (pkt-lines, command requests, pack-ish bytes) on the
 * upload-pack, info/refs and pack routes. Shared by `fuzz_http_test.ts` (the suite's run) and
 * `bench/fuzz_http.ts` (longer runs, inputs/s and the status histogram).
 *
 * The edge has a real filesystem store and a real origin (`git http-backend`, started once). Most
 * inputs are rejected while parsing and never reach the origin. What is allowed, per input:
 *   - the origin was not reached: a 4xx (400, 403, 404, 405, 408, 413, 415), or a 200 whose body
 *     is a protocol-v2 answer (a well-formed fetch answered from the edge's response cache);
 *   - the origin was reached (the request parsed, or is one the edge passes through): any status
 *     below 500, or 502 (the edge's answer when the origin failed), or a body cut short after a
 *     200 when the origin cut its own (the test origin's `http-backend` exits 1 mid-answer on a
 *     request git refuses, e.g. an unknown capability; the edge relays the cut, having sent
 *     its headers already);
 *   - never a thrown exception out of `app.fetch`, never a body not read to its end within the
 *     per-input deadline, never a stack trace or an absolute server path in a non-2xx body.
 */
import { createApp, type EdgeApp } from "../../src/proxy/app.ts";
import { DEFAULT_EDGE_CONFIG, type EdgeConfig } from "../../src/proxy/core/config.ts";
import { InProcessCoordinator } from "../../src/proxy/snapshots/in_process_coordinator.ts";
import { Metrics } from "../../src/proxy/core/metrics.ts";
import { SnapshotBuilder } from "../../src/proxy/snapshots/snapshot.ts";
import { FsPackStore } from "../../edge/deno/fs_store.ts";
import { concat, decodePkts, encodePkt, encodePkts, pktBytes } from "../../src/git/pktline.ts";
import { SeededRandom } from "../support/random.ts";
import { startOrigin } from "../support/origin.ts";
import { makeRepo } from "../support/fixtures.ts";
import { git } from "../support/git.ts";
import { captureCloneRequests } from "../git/transcripts.ts";
import { DeadlineError, withinDeadline } from "../support/deadline.ts";
import { gzipSync } from "fflate";

/** Statuses allowed for an input the edge refused without asking the origin. */
export const LOCAL_STATUSES: ReadonlySet<number> = new Set([400, 403, 404, 405, 408, 413, 415]);

/** A protocol-v2 answer the edge gave alone (a fetch from its response cache, its bundle list). */
const V2_ANSWER =
  /^[0-9a-f]{4}(acknowledgments|shallow-info|wanted-refs|packfile|bundle\.version=1)\n/;

/** Whether `status` is allowed for an input that reached the origin. */
export function originStatusAllowed(status: number): boolean {
  return status < 500 || status === 502;
}

/** One fuzz input: a request to hand to `app.fetch`. */
export interface FuzzInput {
  /** What kind of input it is, for the histogram and failure messages. */
  kind: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Uint8Array;
}

/** One failed assertion, with the seed that reproduces its input. */
export interface FuzzFailure {
  seed: number;
  kind: string;
  what: string;
}

export interface FuzzReport {
  inputs: number;
  ms: number;
  /** `status` (or `status/origin` when the origin was reached) to count. */
  histogram: Map<string, number>;
  /** Inputs that reached the origin. */
  originCalls: number;
  failures: FuzzFailure[];
}

/** The real git requests inputs are made from, plus oids of the origin repository. */
interface Corpus {
  /** Whole request bodies, each one pkt-line request (ls-refs, fetch). */
  requests: Uint8Array[];
  /** The `fetch` requests among them. */
  fetches: Uint8Array[];
  /** Object ids that exist at the origin. */
  oids: string[];
}

const enc = new TextEncoder();
const BOGUS_LENGTHS = [
  "0000",
  "0001",
  "0002",
  "0003",
  "0004",
  "ffff",
  "fff1",
  "FFFF",
  "zzzz",
  "00 5",
  "-001",
  "0x10",
  "\0\0\0\0",
];
const COMMANDS = ["fetch", "ls-refs", "object-info", "bundle-uri", "push", "", "FETCH", "fetch "];

/** A fuzzing world: an origin with one repository, the edge app in-process, its store. */
export interface FuzzWorld extends AsyncDisposable {
  app: EdgeApp;
  /** Calls the edge made to the origin so far. */
  originCalls(): number;
  /** Strings no response may contain (the store's and origin's directories). */
  secrets: string[];
  corpus: Corpus;
}

export async function startFuzzWorld(config: Partial<EdgeConfig> = {}): Promise<FuzzWorld> {
  const origin = await startOrigin();
  const storeDir = await Deno.makeTempDir({ prefix: "gitedge-fuzz-store-" });
  const work = await Deno.makeTempDir({ prefix: "gitedge-fuzz-" });
  try {
    await makeRepo(origin, "r.git", { commits: 4 });
    const bare = `${origin.root}/r.git`;
    const oids = (await git(["rev-list", "--all", "--objects"], { cwd: bare }))
      .split("\n").map((l) => l.slice(0, 40)).filter((l) => l.length === 40);
    // What a real `git clone` sends (ls-refs, then fetch), cut into its requests.
    const requests: Uint8Array[] = [];
    for (const args of [[], ["--depth=1"], ["--filter=blob:none"]]) {
      const raw = await captureCloneRequests(bare, work, args);
      requests.push(...splitRequests(raw));
    }
    let calls = 0;
    const store = new FsPackStore(storeDir);
    const clock = { now: () => Date.now() };
    const originFetch = (req: Request) => {
      calls++;
      return fetch(req);
    };
    const full: EdgeConfig = { ...DEFAULT_EDGE_CONFIG, origin: origin.url, chunks: 2, ...config };
    const metrics = new Metrics();
    const builder = new SnapshotBuilder({ store, originFetch, clock, chunks: full.chunks });
    const coordinator = new InProcessCoordinator({
      store,
      builder,
      clock,
      metrics,
      onError: () => {},
      backoffMs: (full.buildBackoffSeconds ?? DEFAULT_EDGE_CONFIG.buildBackoffSeconds) * 1000,
    });
    const background = new Set<Promise<unknown>>();
    const waitUntil = (p: Promise<unknown>) => {
      const tracked = p.catch(() => {}).finally(() => background.delete(tracked));
      background.add(tracked);
    };
    const app = createApp({
      store,
      coordinator,
      originFetch,
      clock,
      signingKey: crypto.getRandomValues(new Uint8Array(32)),
      config: full,
      waitUntil,
    }, { metrics });
    const stop = async () => {
      while (background.size > 0) await Promise.all(background);
      await coordinator.idle();
      await origin.stop();
      await Deno.remove(storeDir, { recursive: true }).catch(() => {});
      await Deno.remove(work, { recursive: true }).catch(() => {});
    };
    return {
      app,
      originCalls: () => calls,
      secrets: [storeDir, work, origin.root],
      corpus: {
        requests,
        fetches: requests.filter((q) => new TextDecoder().decode(q).includes("command=fetch")),
        oids,
      },
      [Symbol.asyncDispose]: stop,
    };
  } catch (e) {
    await origin.stop();
    await Deno.remove(storeDir, { recursive: true }).catch(() => {});
    await Deno.remove(work, { recursive: true }).catch(() => {});
    throw e;
  }
}

/** Splits a captured stream of requests at each flush packet. */
function splitRequests(raw: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let cur: Uint8Array[] = [];
  for (const p of decodePkts(raw)) {
    cur.push(pktBytes(p));
    if (p.type === "flush") {
      out.push(concat(cur));
      cur = [];
    }
  }
  if (cur.length) out.push(concat(cur));
  return out;
}

/** Byte offsets of each pkt-line header in `bytes` (as far as the lengths can be followed). */
function boundaries(bytes: Uint8Array): number[] {
  const out: number[] = [];
  let o = 0;
  while (o + 4 <= bytes.length) {
    out.push(o);
    const n = parseInt(new TextDecoder().decode(bytes.subarray(o, o + 4)), 16);
    if (!Number.isFinite(n)) break;
    o += n < 4 ? 4 : n;
  }
  return out;
}

/**
 * A command name: mostly `fetch`, which the edge parses whole; others (which the edge passes to
 * the origin once the command line parses, by design) 1 time in 25.
 */
function command(r: SeededRandom): string {
  return r.int(25) === 0 ? pick(r, COMMANDS) : "fetch";
}

function pick<T>(r: SeededRandom, items: readonly T[]): T {
  return items[r.int(items.length)];
}

/**
 * Weights of the mutation kinds below, in `switch` order: bitflip, truncate, bogus-length,
 * oversize, reorder, command, wants, caps, random, pack, splice, odd-line.
 */
const WEIGHTS = [20, 12, 14, 6, 2, 2, 8, 2, 8, 8, 6, 8];
const WEIGHT_TOTAL = WEIGHTS.reduce((a, b) => a + b, 0);

/** A seeded mutation of one of the corpus requests (or a request built from parts). */
function mutatedBody(r: SeededRandom, corpus: Corpus): { kind: string; body: Uint8Array } {
  // Mostly fetch requests, which the edge parses whole; others (ls-refs) go to the origin once
  // their command line parses, so they are rarer.
  const base = r.int(20) === 0 ? pick(r, corpus.requests) : pick(r, corpus.fetches);
  const b = new Uint8Array(base);
  // Weighted: the kinds that often still parse (and so reach the origin) are rarer.
  let roll = r.int(WEIGHT_TOTAL);
  let which = 0;
  while (roll >= WEIGHTS[which]) roll -= WEIGHTS[which++];
  switch (which) {
    case 0: { // bit flips, mostly in a packet's length header
      const n = 1 + r.int(4);
      const bs = boundaries(b);
      for (let i = 0; i < n; i++) {
        const at = r.int(4) ? pick(r, bs) + r.int(4) : r.int(b.length);
        if (at < b.length) b[at] ^= 1 << r.int(8);
      }
      return { kind: "bitflip", body: b };
    }
    case 1: { // truncation at a pkt-line boundary, one byte either side, or anywhere
      const bs = boundaries(b);
      const at = r.int(3) === 0 ? r.int(b.length) : pick(r, bs) + r.int(3) - 1;
      return { kind: "truncate", body: b.subarray(0, Math.max(0, at)) };
    }
    case 2: { // a bogus length at a boundary
      const at = pick(r, boundaries(b));
      b.set(enc.encode(pick(r, BOGUS_LENGTHS)).subarray(0, 4), at);
      return { kind: "bogus-length", body: b };
    }
    case 3: { // an oversize line (declared longer than allowed, or longer than the body)
      const bs = boundaries(b);
      const at = pick(r, bs);
      const len = pick(r, ["ffff", "fff5", "fff4", "fff0", "8000"]);
      const filler = r.bytes(r.int(2) === 0 ? 16 : 65_600);
      return {
        kind: "oversize",
        body: concat([b.subarray(0, at), enc.encode(len), filler, b.subarray(at)]),
      };
    }
    case 4: { // the request's packets in another order
      const pkts = decodePkts(b).map(pktBytes);
      for (let i = pkts.length - 1; i > 0; i--) {
        const j = r.int(i + 1);
        [pkts[i], pkts[j]] = [pkts[j], pkts[i]];
      }
      return { kind: "reorder", body: concat(pkts) };
    }
    case 5: { // duplicate or unknown command lines
      const pkts = decodePkts(b).map(pktBytes);
      const line = encodePkt(`command=${command(r)}${r.int(2) ? "\n" : ""}`);
      pkts.splice(r.int(pkts.length + 1), 0, line);
      return { kind: "command", body: concat(pkts) };
    }
    case 6: { // many wants within the cap, mostly malformed
      const count = 1 + r.int(r.int(10) === 0 ? 20_000 : 300);
      const bad = r.int(50) !== 0;
      const badAt = r.int(count);
      const lines: string[] = [];
      for (let i = 0; i < count; i++) {
        const oid = bad && i === badAt
          ? pick(r, ["zz", "", "0".repeat(39), "g".repeat(40), `${"a".repeat(40)} extra`])
          : pick(r, corpus.oids);
        lines.push(`want ${oid}\n`);
      }
      return {
        kind: bad ? "wants-bad" : "wants",
        body: encodePkts(["command=fetch\n", "object-format=sha1\n", "delim", ...lines, "flush"]),
      };
    }
    case 7: { // capability lines in odd places and duplicated
      const caps = [
        "agent=fuzz/1\n",
        "object-format=sha1\n",
        "object-format=sha256\n",
        "server-option=x\n",
        "session-id=\0\n",
        "=\n",
        "\n",
      ];
      const items: (string | "delim" | "flush")[] = [];
      const n = 1 + r.int(6);
      for (let i = 0; i < n; i++) items.push(pick(r, caps));
      items.splice(r.int(items.length + 1), 0, `command=${command(r)}\n`);
      if (r.int(2)) items.push("delim");
      if (r.int(3)) {
        items.push(
          pick(r, [
            "done\n",
            "thin-pack\n",
            "deepen 0\n",
            "deepen -1\n",
            "filter blob:limit=x\n",
            "packfile-uris https\n",
            "shallow zz\n",
            "have 12\n",
          ]),
        );
      }
      if (r.int(4)) items.push("flush");
      return { kind: "caps", body: encodePkts(items) };
    }
    case 8: // random bytes
      return { kind: "random", body: r.bytes(r.int(300)) };
    case 9: { // a pack where a request should be, or a pack-ish tail after one
      const pack = concat([
        enc.encode("PACK"),
        new Uint8Array([0, 0, 0, 2, 0, 0, 0, 9]),
        r.bytes(r.int(200)),
      ]);
      return {
        kind: "pack",
        body: r.int(2) ? pack : concat([b.subarray(0, r.int(b.length)), pack]),
      };
    }
    case 10: { // two requests spliced
      const other = pick(r, corpus.requests);
      return {
        kind: "splice",
        body: concat([b.subarray(0, r.int(b.length + 1)), other.subarray(r.int(other.length))]),
      };
    }
    default: { // a line with bytes outside the text git writes
      const bad = [
        "command=fetch\0\n",
        "command=fetch\r\n",
        "command=ls-refs\n\n",
        "command=\xff\n",
        "want " + "a".repeat(40) + "\0\n",
      ];
      return {
        kind: "odd-line",
        body: concat([encodePkt(pick(r, bad)), b.subarray(r.int(b.length))]),
      };
    }
  }
}

/** The request that seed `seed` stands for (the same seed, the same input). */
export function fuzzInput(seed: number, corpus: Corpus): FuzzInput {
  const r = new SeededRandom(seed);
  const v2 = {
    "git-protocol": "version=2",
    "content-type": "application/x-git-upload-pack-request",
  };
  const roll = r.int(1000);
  if (roll < 2) {
    // The few that reach the origin by design: info/refs, and a request in protocol v0.
    return r.int(2)
      ? {
        kind: "info-refs",
        method: "GET",
        path: `/r.git/info/refs?service=${
          pick(r, ["git-upload-pack", "git-receive-pack", "x", ""])
        }`,
        headers: { "git-protocol": pick(r, ["version=2", "version=1", "version=9", "\x7f"]) },
      }
      : {
        kind: "v0-post",
        method: "POST",
        path: "/r.git/git-upload-pack",
        headers: {},
        body: r.bytes(40),
      };
  }
  if (roll < 40) {
    // Pack routes with garbage ids, files and signatures.
    const id = pick(r, ["0".repeat(40), "zz", "..", "a".repeat(64), "%2e%2e", ""]);
    const file = pick(r, [
      `pack-${"1".repeat(40)}.pack`,
      "x.pack",
      "..%2fsigning.key",
      "manifest.json",
    ]);
    const q = pick(r, [
      "",
      "?exp=1&sig=x",
      `?exp=${2 ** 40}&sig=${"A".repeat(43)}`,
      "?sig=&exp=NaN",
    ]);
    return {
      kind: "pack-route",
      method: pick(r, ["GET", "HEAD"]),
      path: `/_edge/packs/${id}/${file}${q}`,
      headers: { range: pick(r, ["", "bytes=0-", "bytes=-0", "bytes=9-1", "bytes=x"]) },
    };
  }
  if (roll < 60) {
    // Odd paths and methods, with a body that never parses.
    const path = pick(r, [
      "/",
      "//git-upload-pack",
      "/../git-upload-pack",
      "/%2e%2e/r.git/git-upload-pack",
      "/r.git/../../etc/git-upload-pack",
      `/${"a".repeat(5000)}/git-upload-pack`,
      "/r.git/info/refs",
      "/r.git/git-receive-pack",
      "/_edge/status/",
      "/_edge/warm/..",
      "/r.git/HEAD",
      "/r.git/objects/info/packs",
    ]);
    return {
      kind: "odd-path",
      method: pick(r, ["PUT", "DELETE", "POST", "PATCH"]),
      path,
      headers: v2,
      body: enc.encode("zzzz"),
    };
  }
  const mutated = mutatedBody(r, corpus);
  let { kind, body } = mutated;
  // Most mutations also lose the request's end (its last packet cut), as a connection cut
  // mid-request would: the edge must refuse them without asking the origin. The rest keep it, so
  // a mutation that still parses reaches the origin (a few hundred per 100,000 inputs).
  if (kind !== "wants" && body.length > 4 && r.int(32) !== 0) {
    body = body.subarray(0, body.length - 1 - r.int(3));
    kind = `${kind}-cut`;
  }
  if (roll < 160) {
    // gzip bodies: corrupt, cut short, or whole but of a mutated request.
    return {
      kind: `gzip-${kind}`,
      method: "POST",
      path: "/r.git/git-upload-pack",
      headers: { ...v2, "content-encoding": pick(r, ["gzip", "x-gzip", "GZIP"]) },
      body: gzipCorrupted(r, body),
    };
  }
  return { kind, method: "POST", path: "/r.git/git-upload-pack", headers: v2, body };
}

function gzipCorrupted(r: SeededRandom, body: Uint8Array): Uint8Array {
  // fflate's gzip is synchronous; CompressionStream would need a round trip per input.
  const gz = gzipSync(body);
  switch (r.int(4)) {
    case 0:
      return gz.subarray(0, r.int(gz.length));
    case 1:
      gz[r.int(gz.length)] ^= 1 << r.int(8);
      return gz;
    case 2:
      return r.bytes(r.int(64));
    default:
      return gz;
  }
}

const STACK = /\n\s+at\s|\bat\s+\S+:\d+:\d+|file:\/\/|node_modules|ext:deno/;
const ABS_PATH = /(^|[\s'"`(=])\/(tmp|home|root|var|usr|etc|work|proc|opt|srv|mnt)\b/;

/** Runs the inputs for seeds `seed * 1_000_003 + i`, `i < inputs`; collects failures. */
export async function runFuzz(
  world: FuzzWorld,
  opts: { inputs: number; seed: number; perInputMs: number; maxFailures?: number },
): Promise<FuzzReport> {
  const histogram = new Map<string, number>();
  const failures: FuzzFailure[] = [];
  const maxFailures = opts.maxFailures ?? 20;
  const started = performance.now();
  const calls0 = world.originCalls();
  for (let i = 0; i < opts.inputs && failures.length < maxFailures; i++) {
    const seed = opts.seed * 1_000_003 + i;
    const input = fuzzInput(seed, world.corpus);
    const fail = (what: string) => failures.push({ seed, kind: input.kind, what });
    const before = world.originCalls();
    let status: number;
    let text: string;
    try {
      [status, text] = await withinDeadline(
        (async () => {
          const res = await world.app.fetch(
            new Request(`http://edge.test${input.path}`, {
              method: input.method,
              headers: input.headers,
              body: input.body as Uint8Array<ArrayBuffer> | undefined,
            }),
          );
          const bytes = await res.bytes();
          return [res.status, new TextDecoder("latin1").decode(bytes)] as [number, string];
        })(),
        `input ${seed} (${input.kind})`,
        opts.perInputMs,
      );
    } catch (e) {
      // The origin may end a response it has begun (the test origin's `http-backend` exits 1 on
      // a request git refuses, after its headers): the edge relays the cut. Only a request that
      // reached the origin may be cut; the edge never throws or hangs on its own.
      if (world.originCalls() > before && !(e instanceof DeadlineError)) {
        histogram.set("cut/origin", (histogram.get("cut/origin") ?? 0) + 1);
        continue;
      }
      fail(`threw or hung: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
      continue;
    }
    const reached = world.originCalls() > before;
    const key = reached ? `${status}/origin` : `${status}`;
    histogram.set(key, (histogram.get(key) ?? 0) + 1);
    const local = LOCAL_STATUSES.has(status) || (status === 200 && V2_ANSWER.test(text));
    if (reached ? !originStatusAllowed(status) : !local) {
      fail(
        `status ${status} (origin ${reached ? "reached" : "not reached"}): ${text.slice(0, 300)}`,
      );
    }
    if (status >= 300 || !reached) {
      const m = STACK.exec(text) ?? ABS_PATH.exec(text);
      if (m) fail(`body names a stack frame or path (${m[0]}): ${text.slice(0, 300)}`);
      for (const s of world.secrets) {
        if (text.includes(s)) fail(`body names ${s}: ${text.slice(0, 300)}`);
      }
    }
  }
  return {
    inputs: opts.inputs,
    ms: performance.now() - started,
    histogram,
    originCalls: world.originCalls() - calls0,
    failures,
  };
}

/** The histogram as `status: count` lines, most frequent first. */
export function formatHistogram(h: Map<string, number>): string {
  return [...h].sort((a, b) => b[1] - a[1]).map(([k, n]) => `  ${k.padEnd(12)} ${n}`).join("\n");
}
