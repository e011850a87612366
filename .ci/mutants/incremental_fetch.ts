/** Mutants: Incremental fetches through the response cache (test/proxy/incremental_fetch_test.ts). */
import { EDGE_SUITE, type Mutant } from "./mutant.ts";

export const INCREMENTAL_FETCH_MUTANTS: Mutant[] = [
  {
    name: "response_cache/haves-uncacheable",
    file: "src/proxy/core/response_cache.ts",
    from: 'if (args.shallow.length > 0) return "client is shallow";',
    to:
      'if (args.haves.length > 0) return "incremental fetch";\n  if (args.shallow.length > 0) return "client is shallow";',
    tests: ["test/proxy/incremental_fetch_test.ts"],
    filter: "at once",
  },
  {
    name: "response_cache/haves-uncacheable-worker",
    file: "src/proxy/core/response_cache.ts",
    from: 'if (args.shallow.length > 0) return "client is shallow";',
    to:
      'if (args.haves.length > 0) return "incremental fetch";\n  if (args.shallow.length > 0) return "client is shallow";',
    tests: ["test/edge/cloudflare/worker_edge_test.ts"],
    filter: "gitedge Worker in workerd",
  },
  {
    name: "response_cache/incremental-keyed-by-tags",
    file: "src/proxy/core/response_cache.ts",
    from: "return args.includeTag && args.haves.length === 0;",
    to: "return args.includeTag;",
    tests: ["test/proxy/incremental_fetch_test.ts"],
    filter: "at once",
  },
  {
    name: "response_cache/key-without-haves",
    file: "src/proxy/core/response_cache.ts",
    from: "    ...[...new Set(args.haves)].sort().map((h) => `have ${h}`),\n",
    to: "",
    tests: ["test/proxy/incremental_fetch_test.ts"],
    filter: "other states",
  },
  {
    name: "response_cache/key-without-done",
    file: "src/proxy/core/response_cache.ts",
    from: "    `done ${args.done}`,\n",
    to: "",
    tests: ["test/proxy/incremental_fetch_test.ts"],
    filter: "without done",
  },
  {
    name: "response_cache/ref-names-cacheable",
    file: "src/proxy/core/response_cache.ts",
    from: 'if (args.deepenNot.length > 0 || args.wantRefs.length > 0) return "names refs";',
    to: "",
    tests: ["test/proxy/core/response_cache_test.ts"],
  },
  {
    name: "response_cache/no-packfile-section-ok",
    file: "src/proxy/core/response_cache.ts",
    from: 'if (!inPack) fail("no packfile section");',
    to: "",
    tests: ["test/proxy/core/response_cache_test.ts"],
  },
  {
    name: "response_cache/no-final-flush-ok",
    file: "src/proxy/core/response_cache.ts",
    from: 'if (!lastFlush) fail("no final flush");',
    to: "",
    tests: ["test/proxy/core/response_cache_test.ts"],
  },
  {
    name: "response_cache/band-3-ok",
    file: "src/proxy/core/response_cache.ts",
    from: '} else if (p[0] === 3) fail("remote error in band 3");',
    to: "} else if (p[0] === 3) void 0;",
    tests: ["test/proxy/core/response_cache_test.ts"],
  },
  {
    name: "response_cache/no-size-cap",
    file: "src/proxy/core/response_cache.ts",
    from: "if (total > maxBytes) fail(`larger than ${maxBytes} bytes`);",
    to: "",
    tests: ["test/proxy/core/response_cache_test.ts"],
  },
  // The stored answer's authorisation (a probe fetch unless the memo vouches: fetch_probe.ts,
  // docs/access.md); these replace the mutants of the tag-listing check it replaced.
  {
    name: "cached_fetch/no-probe",
    file: "src/proxy/fetch/cached_fetch.ts",
    from:
      "  const verdict = await authorisedToFetch(ctx, request, repo, args.wants, formatOf(req));",
    to: '  const verdict = "authorised";',
    tests: [EDGE_SUITE],
    filter: "/probe fetch|private origin/",
  },
  {
    name: "cached_fetch/probe-refusal-trusts",
    file: "src/proxy/fetch/cached_fetch.ts",
    from: '  if (verdict instanceof Response) return verdict;\n  if (verdict !== "authorised") {',
    to: '  if (verdict !== "authorised" && !(verdict instanceof Response)) {',
    tests: [EDGE_SUITE],
    filter: "/private origin/",
  },
  {
    name: "cached_fetch/memo-trusts-anyone",
    file: "src/proxy/origin/fetch_probe.ts",
    from: '  if (await probedAhead(ctx, request, repo)) return "authorised";',
    to: '  return "authorised";',
    tests: ["test/proxy/incremental_fetch_test.ts"],
    filter: "private",
  },
  {
    name: "cached_fetch/probe-refusal-trusts-incremental",
    file: "src/proxy/fetch/cached_fetch.ts",
    from: '  if (verdict instanceof Response) return verdict;\n  if (verdict !== "authorised") {',
    to: '  if (verdict !== "authorised" && !(verdict instanceof Response)) {',
    tests: ["test/proxy/incremental_fetch_test.ts"],
    filter: "private",
  },
];
