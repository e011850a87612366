/** Mutants: Git LFS through the edge (src/proxy/lfs). */
import type { Mutant } from "./mutant.ts";

const LFS_DENO = "test/edge/deno/lfs_deno_test.ts";
const LFS_OBJECTS = "test/proxy/lfs/lfs_objects_test.ts";
const LFS_URLS = "test/proxy/lfs/lfs_urls_test.ts";
const LFS_ORIGIN = "test/proxy/lfs/lfs_origin_test.ts";
const LFS_EVICTION = "test/edge/deno/lfs_eviction_test.ts";

export const LFS_MUTANTS: Mutant[] = [
  {
    name: "lfs/api-not-routed",
    file: "src/proxy/app.ts",
    from: "    if (lfsPath) {",
    to: "    if (lfsPath && false) {",
    tests: [LFS_DENO],
    filter: "second costs the LFS origin",
  },
  {
    name: "lfs/downloads-not-rewritten",
    file: "src/proxy/lfs/lfs_api.ts",
    from: "  for (const { index, object } of granted) {",
    to: "  for (const { index, object } of granted.slice(0, 0)) {",
    tests: [LFS_DENO],
    filter: "second costs the LFS origin",
  },
  {
    name: "lfs/refusal-rewritten",
    file: "src/proxy/lfs/lfs_api.ts",
    from: 'if (origin.status !== 200 || batch.operation !== "download") {',
    to: 'if (batch.operation !== "download") {',
    tests: [LFS_DENO],
    filter: "private repository",
  },
  {
    name: "lfs/unverified-fill",
    file: "src/proxy/lfs/lfs_objects.ts",
    from: "const checkedBody = res.body.pipeThrough(verifying(ctx, oid, size));",
    to: "const checkedBody = res.body;",
    tests: [LFS_OBJECTS],
    filter: "not its oid",
  },
  {
    name: "lfs/hash-unchecked",
    file: "src/proxy/lfs/lfs_objects.ts",
    from: "if (digest !== oid) throw",
    to: "if (digest === null) throw",
    tests: [LFS_OBJECTS],
    filter: "not its oid",
  },
  {
    name: "lfs/last-chunk-not-held",
    file: "src/proxy/lfs/lfs_objects.ts",
    from: "      if (held) controller.enqueue(held);\n      held = chunk;",
    to: "      controller.enqueue(chunk);",
    tests: [LFS_OBJECTS],
    filter: "not its oid",
  },
  {
    name: "lfs/no-single-flight",
    file: "src/proxy/lfs/lfs_objects.ts",
    from: "  lfs.fills.set(oid, flight);",
    to: "",
    tests: [LFS_OBJECTS],
    filter: "fetch it from the origin once",
  },
  {
    name: "lfs/refill-for-any-caller",
    file: "src/proxy/lfs/lfs_objects.ts",
    from: "if (await callerTag(ctx.signer, authorization) !== verdict.tag) {",
    to: "if (false) {",
    tests: [LFS_OBJECTS],
    filter: "filled by another",
  },
  {
    name: "lfs/signature-without-size",
    file: "src/proxy/lfs/lfs_urls.ts",
    from: "return `${path}\\n${repoPath}\\n${size}\\n${tag}`;",
    to: "return `${path}\\n${repoPath}\\n${tag}`;",
    tests: [LFS_URLS],
  },
  {
    name: "lfs/signature-without-caller",
    file: "src/proxy/lfs/lfs_urls.ts",
    from: "return `${path}\\n${repoPath}\\n${size}\\n${tag}`;",
    to: "return `${path}\\n${repoPath}\\n${size}`;",
    tests: [LFS_URLS],
  },
  {
    name: "lfs/answer-size-unchecked",
    file: "src/proxy/lfs/lfs_origin.ts",
    from: "if (o.size !== sizes.get(o.oid)) {",
    to: "if (o.size === null) {",
    tests: [LFS_ORIGIN],
  },
  {
    name: "lfs/oid-unchecked",
    file: "src/proxy/lfs/lfs_origin.ts",
    from: 'if (!isRecord(o) || typeof o.oid !== "string" || !OID.test(o.oid)) {',
    to: 'if (!isRecord(o) || typeof o.oid !== "string") {',
    tests: [LFS_ORIGIN],
  },
  {
    name: "lfs/batch-unbounded",
    file: "src/proxy/lfs/lfs_origin.ts",
    from: "    if (total > max) {",
    to: "    if (total < 0) {",
    tests: [LFS_DENO],
    filter: "bad batch requests",
  },
  {
    name: "lfs/any-api-path",
    file: "src/proxy/app.ts",
    from:
      'if (!LFS_REST.test(lfsPath.rest) || lfsPath.rest.split("/").some((s) => /^\\.+$/.test(s))) {',
    to: "if (false) {",
    tests: [LFS_DENO],
    filter: "bad batch requests",
  },
  {
    name: "lfs/credentials-not-forwarded",
    file: "src/proxy/lfs/lfs_origin.ts",
    from: 'const FORWARDED = ["authorization", "accept",',
    to: 'const FORWARDED = ["accept",',
    tests: [LFS_DENO],
    filter: "push and locks",
  },

  {
    name: "lfs/evict-pinned",
    file: "src/proxy/ops/store_eviction.ts",
    from: "if (this.#deps.lfs!.pinnedUntil(oid) > clock.now()) {",
    to: "if (false) {",
    tests: [LFS_EVICTION],
  },
  {
    name: "lfs/not-counted",
    file: "src/proxy/ops/store_eviction.ts",
    from: "    if (!this.#deps.lfs) return [];",
    to: "    return [];",
    tests: [LFS_EVICTION],
  },
  {
    name: "lfs/pin-forgotten",
    file: "src/proxy/lfs/lfs_api.ts",
    from: "    lfs.pin(object.oid, expires * 1000);",
    to: "",
    tests: [LFS_EVICTION],
  },

  {
    name: "lfs/stored-size-unchecked",
    file: "src/proxy/lfs/lfs_objects.ts",
    from: "    if (info.size !== verdict.size) {",
    to: "    if (false) {",
    tests: [LFS_OBJECTS],
    filter: "fetch it from the origin once",
  },
  {
    name: "lfs/origin-length-unchecked",
    file: "src/proxy/lfs/lfs_objects.ts",
    from: "if (declared !== null && Number(declared) !== size) {",
    to: "if (false) {",
    tests: [LFS_OBJECTS],
    filter: "fetch it from the origin once",
  },

  {
    name: "lfs/private-href-fetched",
    file: "src/proxy/lfs/lfs_origin.ts",
    from: "if (endpoint !== undefined && !hrefAllowed(url, endpoint)) {",
    to: "if (false) {",
    tests: [LFS_ORIGIN],
  },

  {
    name: "lfs/claims-ignored",
    file: "src/proxy/lfs/lfs_objects.ts",
    from: "    if (lfs.claims) {",
    to: "    if (false) {",
    tests: [LFS_OBJECTS],
    filter: "with claims",
  },
];
