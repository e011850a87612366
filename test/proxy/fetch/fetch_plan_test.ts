import type { CommandRequest } from "../../../src/git/command_request.ts";
import {
  emptyFetchArgs,
  type FetchArgs,
  serializeFetchArgs,
} from "../../../src/git/fetch_request.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";
import {
  type FetchInputs,
  type FetchPlan,
  NO_SNAPSHOT,
  planFetch,
  type SnapshotLookup,
  wantsSnapshot,
} from "../../../src/proxy/fetch/fetch_plan.ts";
import { classifyFetch } from "../../../src/proxy/fetch/eligibility.ts";
import { assertEquals } from "../../support/assert.ts";

const oid = (c: string) => c.repeat(40);
const BUILT = 1_700_000_000_000;
const pack = (c: string) => ({
  hash: oid(c),
  key: `repos/r/packs/pack-${c}.pack`,
  size: 1,
  objects: 1,
});

/** main at a, feature at b, tag v1 at c; two packs. */
const MANIFEST: Manifest = {
  version: 1,
  originUrl: "https://git.test/r.git",
  tips: { "refs/heads/main": oid("a"), "refs/heads/feature": oid("b"), "refs/tags/v1": oid("c") },
  layers: [[pack("1")], [pack("2")]],
  builtAt: BUILT,
};
const SHA256_MANIFEST: Manifest = { ...MANIFEST, objectFormat: "sha256" };
const ALL = [oid("a"), oid("b"), oid("c")];
const READY: SnapshotLookup = { manifest: MANIFEST, missingPack: false };
const BROKEN: SnapshotLookup = { manifest: MANIFEST, missingPack: true };
const EMPTY: SnapshotLookup = {
  manifest: { ...MANIFEST, tips: {}, layers: [] },
  missingPack: false,
};

/** A stock git 2.39 full clone asking for URIs: wants, done, thin-pack, ofs-delta, include-tag. */
function clone(more: Partial<FetchArgs> = {}): FetchArgs {
  return {
    ...emptyFetchArgs(),
    wants: ALL,
    done: true,
    thinPack: true,
    ofsDelta: true,
    includeTag: true,
    packfileUris: ["https"],
    ...more,
  };
}

function inputs(
  args: FetchArgs,
  { scheme = "https", ...more }: Partial<FetchInputs> & { scheme?: string } = {},
  caps: string[] = [],
): FetchInputs {
  const req: CommandRequest = {
    command: "fetch",
    capabilities: ["agent=git/2.39.5", ...caps],
    args: serializeFetchArgs(args),
  };
  const fetch = classifyFetch(req, args, scheme);
  return {
    req,
    args,
    fetch,
    snapshot: wantsSnapshot(fetch, more.snapshotPlainClones) ? READY : NO_SNAPSHOT,
    originAdvertisesUris: false,
    recentlyAuthorised: false,
    responseCacheOn: false,
    snapshotPlainClones: false,
    ...more,
  };
}

const forward = (noUris: string | null, more: Partial<FetchPlan> = {}): FetchPlan =>
  ({ noUris, build: null, action: "forward", stripUris: true, ...more }) as FetchPlan;

/** What the origin gets when the snapshot's packs go by URI. */
const REWRITTEN = (args: FetchArgs): FetchArgs => ({
  ...args,
  haves: ALL,
  thinPack: false,
  packfileUris: null,
  done: true,
});

/** The origin's request through the response cache: no `packfile-uris`, anywhere. */
function cached(input: FetchInputs, build: FetchPlan["build"], noUris: string): FetchPlan {
  const originArgs = { ...input.args, packfileUris: null };
  return {
    noUris,
    build,
    action: "response-cache",
    originReq: { ...input.req, args: serializeFetchArgs(originArgs) },
    originArgs,
  };
}

const TABLE: [string, FetchInputs, FetchPlan][] = [
  // The request alone rules URIs out: forwarded as sent, less packfile-uris; no snapshot looked at.
  [
    "no packfile-uris asked",
    inputs(clone({ packfileUris: null })),
    forward("client did not ask for packfile-uris"),
  ],
  [
    "asked for another scheme",
    inputs(clone({ packfileUris: ["ftp"] })),
    forward("client did not ask for packfile-uris"),
  ],
  [
    "edge on http",
    inputs(clone(), { scheme: "http" }),
    forward("client did not ask for packfile-uris"),
  ],
  ["incremental fetch", inputs(clone({ haves: [oid("e")] })), forward("incremental fetch")],
  ["depth", inputs(clone({ deepen: 1 })), forward("shallow")],
  ["shallow client", inputs(clone({ shallow: [oid("a")] })), forward("shallow")],
  ["shallow-since", inputs(clone({ deepenSince: 1 })), forward("shallow")],
  ["shallow-exclude", inputs(clone({ deepenNot: ["refs/heads/x"] })), forward("shallow")],
  ["partial clone", inputs(clone({ filter: "blob:none" })), forward("partial clone")],
  ["wait-for-done", inputs(clone({ waitForDone: true })), forward("wait-for-done")],
  ["no wants", inputs(clone({ wants: [] })), forward("no wants")],
  ["want-ref", inputs(clone({ wantRefs: ["refs/heads/main"] })), forward("want-ref")],
  [
    "origin advertised packfile-uris itself: bytes as sent",
    inputs(clone({ deepen: 1 }), { originAdvertisesUris: true }),
    forward("shallow", { stripUris: false }),
  ],
  // The snapshot decides.
  [
    "no snapshot: build one",
    inputs(clone(), { snapshot: NO_SNAPSHOT }),
    forward("no snapshot", { build: { builtAt: null, rebuild: false } }),
  ],
  [
    "a pack missing: rebuild afresh, hand out nothing",
    inputs(clone(), { snapshot: BROKEN }),
    forward("snapshot pack missing", { build: { builtAt: BUILT, rebuild: true } }),
  ],
  [
    "empty snapshot, wants it lacks: refresh",
    inputs(clone(), { snapshot: EMPTY }),
    forward("empty snapshot", { build: { builtAt: BUILT, rebuild: false } }),
  ],
  [
    "single-branch: part of the snapshot",
    inputs(clone({ wants: [oid("a")] })),
    forward("wants part of the snapshot"),
  ],
  [
    "--no-tags: part of the snapshot",
    inputs(clone({ wants: [oid("a"), oid("b")] })),
    forward("wants part of the snapshot"),
  ],
  [
    "single-branch after main moved: refresh, no URIs",
    inputs(clone({ wants: [oid("d")] })),
    forward("wants part of the snapshot", { build: { builtAt: BUILT, rebuild: false } }),
  ],
  // URIs go out.
  [
    "full clone, origin vouched recently: the edge answers alone",
    inputs(clone(), { recentlyAuthorised: true }),
    { noUris: null, build: null, action: "answer-from-snapshot", manifest: MANIFEST },
  ],
  [
    "full clone, no recent word from the origin: rewrite",
    inputs(clone()),
    {
      noUris: null,
      build: null,
      action: "rewrite",
      manifest: MANIFEST,
      originArgs: REWRITTEN(clone()),
    },
  ],
  [
    "full clone without done (negotiation): rewrite",
    inputs(clone({ done: false }), { recentlyAuthorised: true }),
    {
      noUris: null,
      build: null,
      action: "rewrite",
      manifest: MANIFEST,
      originArgs: REWRITTEN(clone({ done: false })),
    },
  ],
  [
    "unknown argument: rewrite, not answered",
    inputs(clone({ other: ["future-arg"] }), { recentlyAuthorised: true }),
    {
      noUris: null,
      build: null,
      action: "rewrite",
      manifest: MANIFEST,
      originArgs: REWRITTEN(clone({ other: ["future-arg"] })),
    },
  ],
  [
    "sha256 request: rewrite, not answered",
    inputs(clone(), { recentlyAuthorised: true }, ["object-format=sha256"]),
    {
      noUris: null,
      build: null,
      action: "rewrite",
      manifest: MANIFEST,
      originArgs: REWRITTEN(clone()),
    },
  ],
  [
    "sha256 request of a SHA-256 snapshot: answered (in its object format)",
    inputs(clone(), {
      recentlyAuthorised: true,
      snapshot: { manifest: SHA256_MANIFEST, missingPack: false },
    }, ["object-format=sha256"]),
    {
      noUris: null,
      build: null,
      action: "answer-from-snapshot",
      manifest: SHA256_MANIFEST,
    },
  ],
  [
    "full clone after main moved: rewrite and refresh",
    inputs(clone({ wants: [oid("d"), oid("b"), oid("c")] }), { recentlyAuthorised: true }),
    {
      noUris: null,
      build: { builtAt: BUILT, rebuild: false },
      action: "rewrite",
      manifest: MANIFEST,
      originArgs: REWRITTEN(clone({ wants: [oid("d"), oid("b"), oid("c")] })),
    },
  ],
  [
    "the response cache never takes a rewrite",
    inputs(clone(), { responseCacheOn: true }),
    {
      noUris: null,
      build: null,
      action: "rewrite",
      manifest: MANIFEST,
      originArgs: REWRITTEN(clone()),
    },
  ],
];

/** Cases with the response cache on: only cacheable requests that get no URIs go through it. */
function cacheCases(): [string, FetchInputs, FetchPlan][] {
  const on = { responseCacheOn: true };
  const plain = inputs(clone({ packfileUris: null }), on);
  const noSnapshot = inputs(clone(), { ...on, snapshot: NO_SNAPSHOT });
  const single = inputs(clone({ wants: [oid("a")] }), on);
  const theirs = inputs(clone({ packfileUris: null }), { ...on, originAdvertisesUris: true });
  const round = inputs(clone({ packfileUris: null, done: false, haves: [oid("e")] }), on);
  const incremental = inputs(clone({ haves: [oid("e")], done: false }), on);
  const plainIncremental = inputs(clone({ packfileUris: null, haves: [oid("e")] }), on);
  return [
    ["cache: plain clone", plain, cached(plain, null, "client did not ask for packfile-uris")],
    [
      "cache: no snapshot yet (build too)",
      noSnapshot,
      cached(noSnapshot, { builtAt: null, rebuild: false }, "no snapshot"),
    ],
    [
      "cache: single-branch with URIs asked",
      single,
      cached(single, null, "wants part of the snapshot"),
    ],
    [
      "cache: an origin advertising packfile-uris gets the request as sent",
      theirs,
      {
        noUris: "client did not ask for packfile-uris",
        build: null,
        action: "response-cache",
        originReq: theirs.req,
        originArgs: theirs.args,
      },
    ],
    [
      "cache: a negotiation round (no done) goes through the cache (stored only with a pack)",
      round,
      cached(round, null, "client did not ask for packfile-uris"),
    ],
    [
      "cache: an incremental fetch (haves) with URIs asked goes through the cache",
      incremental,
      cached(incremental, null, "incremental fetch"),
    ],
    [
      "cache: an incremental fetch without URIs goes through the cache",
      plainIncremental,
      cached(plainIncremental, null, "client did not ask for packfile-uris"),
    ],
    [
      "cache: wait-for-done is not cached",
      inputs(clone({ packfileUris: null, haves: [oid("e")], waitForDone: true }), on),
      forward("client did not ask for packfile-uris"),
    ],
    [
      "cache: shallow client is not cached",
      inputs(clone({ shallow: [oid("a")] }), on),
      forward("shallow"),
    ],
  ];
}

/** The snapshot of one layer (two packs) a plain clone may be streamed from. */
const ONE_LAYER: Manifest = { ...MANIFEST, layers: [[pack("1"), pack("2")]] };
const ONE: SnapshotLookup = { manifest: ONE_LAYER, missingPack: false };

/** Plain clones (no packfile-uris) with streaming from the snapshot on. */
function streamCases(): [string, FetchInputs, FetchPlan][] {
  const on = { snapshotPlainClones: true, recentlyAuthorised: true, snapshot: ONE };
  const plain = (more: Partial<FetchArgs> = {}) => clone({ packfileUris: null, ...more });
  const streamed: FetchPlan = {
    noUris: null,
    build: null,
    action: "stream-snapshot",
    manifest: ONE_LAYER,
  };
  const no = "client did not ask for packfile-uris";
  return [
    ["stream: a plain clone of exactly the tips", inputs(plain(), on), streamed],
    [
      "stream: wants repeated, the same set",
      inputs(plain({ wants: [...ALL, oid("a")] }), on),
      streamed,
    ],
    [
      "stream: URIs asked in a scheme the edge does not serve",
      inputs(clone(), { ...on, scheme: "ftp" }),
      streamed,
    ],
    [
      "stream: no include-tag (the tips are wanted anyway)",
      inputs(plain({ includeTag: false }), on),
      streamed,
    ],
    [
      "stream: before the response cache",
      inputs(plain(), { ...on, responseCacheOn: true }),
      streamed,
    ],
    ["stream: setting off", inputs(plain(), { ...on, snapshotPlainClones: false }), forward(no)],
    [
      "stream: no recent word from the origin",
      inputs(plain(), { ...on, recentlyAuthorised: false }),
      forward(no),
    ],
    [
      "stream: wants a tip less (single branch)",
      inputs(plain({ wants: [oid("a"), oid("b")] }), on),
      forward(no),
    ],
    [
      "stream: origin moved (a want the snapshot lacks): a refresh",
      inputs(plain({ wants: [oid("d"), oid("b"), oid("c")] }), on),
      forward(no, { build: { builtAt: BUILT, rebuild: false } }),
    ],
    [
      "stream: a want more than the tips: a refresh",
      inputs(plain({ wants: [...ALL, oid("d")] }), on),
      forward(no, { build: { builtAt: BUILT, rebuild: false } }),
    ],
    ["stream: two layers", inputs(plain(), { ...on, snapshot: READY }), forward(no)],
    [
      "stream: a pack missing: a rebuild",
      inputs(plain(), { ...on, snapshot: { manifest: ONE_LAYER, missingPack: true } }),
      forward(no, { build: { builtAt: BUILT, rebuild: true } }),
    ],
    [
      "stream: no snapshot: the first build",
      inputs(plain(), { ...on, snapshot: NO_SNAPSHOT }),
      forward(no, { build: { builtAt: null, rebuild: false } }),
    ],
    ["stream: no ofs-delta", inputs(plain({ ofsDelta: false }), on), forward(no)],
    ["stream: negotiation (no done)", inputs(plain({ done: false }), on), forward(no)],
    ["stream: haves", inputs(plain({ haves: [oid("e")] }), on), forward(no)],
    ["stream: depth", inputs(plain({ deepen: 1 }), on), forward(no)],
    ["stream: filter", inputs(plain({ filter: "blob:none" }), on), forward(no)],
    ["stream: want-ref", inputs(plain({ wantRefs: ["refs/heads/main"] }), on), forward(no)],
    ["stream: unknown argument", inputs(plain({ other: ["future-arg"] }), on), forward(no)],
    [
      "stream: another object format than the snapshot's",
      inputs(plain(), on, ["object-format=sha256"]),
      forward(no),
    ],
    [
      "stream: a URI clone still gets URIs",
      inputs(clone(), on),
      { noUris: null, build: null, action: "answer-from-snapshot", manifest: ONE_LAYER },
    ],
  ];
}

Deno.test("fetch plan: every branch of the decision, by table", () => {
  for (const [name, input, want] of [...TABLE, ...cacheCases(), ...streamCases()]) {
    assertEquals(planFetch(input), want, name);
  }
});

Deno.test("fetch plan: the snapshot is looked up only for requests that may get URIs", () => {
  const looksUp = (args: FetchArgs, scheme: string, plainClones?: boolean) =>
    wantsSnapshot(inputs(args, { scheme }).fetch, plainClones);
  assertEquals(looksUp(clone(), "https"), true);
  assertEquals(looksUp(clone(), "http"), false);
  assertEquals(looksUp(clone({ filter: "tree:0" }), "https"), false);
  // A plain full clone is looked up only with streaming from the snapshot on.
  assertEquals(looksUp(clone({ packfileUris: null }), "https"), false);
  assertEquals(looksUp(clone({ packfileUris: null }), "https", true), true);
  assertEquals(looksUp(clone({ packfileUris: null, deepen: 1 }), "https", true), false);
  // Not looked up means no snapshot, and nothing is built for such a request.
  const plan = planFetch(inputs(clone({ filter: "tree:0" }), { snapshot: NO_SNAPSHOT }));
  assertEquals(plan.build, null);
});

Deno.test("fetch plan: haves are the snapshot's distinct tips", () => {
  const manifest = { ...MANIFEST, tips: { ...MANIFEST.tips, "refs/heads/also-a": oid("a") } };
  const args = clone({ wants: ALL });
  const plan = planFetch(inputs(args, { snapshot: { manifest, missingPack: false } }));
  assertEquals(plan.action, "rewrite");
  if (plan.action === "rewrite") assertEquals(plan.originArgs.haves, ALL);
});

Deno.test("fetch plan: with a mirror, what would go to the origin or the response cache goes to the mirror, with that as its fallback", () => {
  const MIRROR = { mirror: { originAdvertisesFilter: true } };
  const plan = (args: FetchArgs, more: Partial<FetchInputs> = {}, caps: string[] = []) =>
    planFetch(inputs(args, { ...MIRROR, ...more }, caps));
  const mirrored = (_input: FetchInputs, fallback: FetchPlan, askOrigin = true): FetchPlan =>
    ({
      noUris: fallback.noUris,
      build: fallback.build,
      action: "answer-from-mirror",
      askOrigin,
      fallback,
    }) as FetchPlan;
  const shallow = clone({ packfileUris: null, deepen: 1 });
  // Shallow, blobless, incremental, one commit: the mirror, asking the origin first unless the
  // credential is fresh in the memo.
  assertEquals(
    plan(shallow),
    mirrored(inputs(shallow), forward("client did not ask for packfile-uris")),
  );
  assertEquals(
    plan(shallow, { recentlyAuthorised: true }),
    mirrored(inputs(shallow), forward("client did not ask for packfile-uris"), false),
  );
  const blobless = clone({ filter: "blob:none" });
  const withCache = inputs(blobless, { ...MIRROR, responseCacheOn: true });
  assertEquals(planFetch(withCache), mirrored(withCache, cached(withCache, null, "partial clone")));
  const fetchFrom = clone({ haves: [oid("d")], done: false });
  assertEquals(plan(fetchFrom).action, "answer-from-mirror");
  // Whatever the mirror's upload-pack would refuse, or only the origin can answer, goes as before.
  assertEquals(
    plan(blobless, { mirror: { originAdvertisesFilter: false } }),
    forward("partial clone"),
  );
  assertEquals(
    plan(clone({ packfileUris: null, wantRefs: ["refs/heads/main"] })).action,
    "forward",
  );
  assertEquals(plan(clone({ packfileUris: null, sidebandAll: true, deepen: 1 })).action, "forward");
  assertEquals(plan(clone({ packfileUris: null, deepenNot: ["refs/tags/v1"] })).action, "forward");
  assertEquals(plan(clone({ packfileUris: null, deepen: 1, other: ["x-new"] })).action, "forward");
  assertEquals(plan(shallow, {}, ["object-format=sha256"]).action, "forward");
  assertEquals(plan(clone({ packfileUris: null, wants: [], deepen: 1 })).action, "forward");
  // The snapshot paths keep what they take.
  assertEquals(plan(clone(), { recentlyAuthorised: true }).action, "answer-from-snapshot");
  assertEquals(plan(clone({ wants: [...ALL, oid("e")] })).action, "rewrite");
  // No mirror: as before.
  assertEquals(planFetch(inputs(shallow)), forward("client did not ask for packfile-uris"));
});
