/**
 * Mutation testing: one-line changes a real bug could make to security- and correctness-critical
 * lines, each run against the test files that should notice it. A mutant is "caught" when those
 * tests fail, "survived" when they pass (a gap in the tests, or an equivalent change listed with
 * its reason in test/README.md).
 *
 *   npx --yes deno@2.9.6 task mutants [--only name[,name…]] [--list] [--timeout seconds]
 *       [--tests file[,file…]] [--filter pattern]
 *
 * `--tests` and `--filter` replace the chosen mutants' own test files and filter: to see whether
 * one test alone catches a mutant (before and after writing it).
 *
 * The mutants are applied to a copy of the checkout (its files as they are now, node_modules
 * linked), never to the checkout itself; the copy is removed on exit, on Ctrl-C or SIGTERM. Each
 * mutant is applied by replacing an exact text that must occur exactly once in its file ("stale"
 * otherwise), its tests run with `deno test --no-check` (a mutant that does not type-check still
 * runs), niced, and the copy's file is restored before the next one. Not part of `deno task test`:
 * a full run takes long.
 */

export interface Mutant {
  /** Short unique name (`--only` matches it as a substring). */
  name: string;
  file: string;
  /** Exact original text; must occur exactly once in `file`. */
  from: string;
  to: string;
  /** Test files that must fail with the mutant in place. */
  tests: string[];
  /** `deno test --filter` for those files (a substring or /regex/ of test names). */
  filter?: string;
}

export type Outcome = "caught" | "survived" | "stale" | "timeout";

const EDGE_SUITE = "test/edge/deno/deno_edge_test.ts";
const BUILD_STEPS = "test/proxy/build_steps_test.ts";
const EDGE_INDEX = "test/client/edge_index_test.ts";
const FRONT = "test/edge/deno/front_test.ts";
const STREAM = "test/proxy/fetch/streamed_fetch_test.ts";
const DOWNLOADS = ["test/client/fetch_packfiles_test.ts", "test/client/ranged_response_test.ts"];

export const MUTANTS: Mutant[] = [
  // Signed pack URLs.
  {
    name: "signing/prefix-signature",
    file: "src/proxy/core/signing.ts",
    from:
      'return await crypto.subtle.verify("HMAC", await this.#key, mac, message(path, expires));',
    to:
      "const full = fromBase64Url(await this.sign(path, expires))!; return mac.every((b, i) => b === full[i]);",
    tests: ["test/proxy/core/signing_test.ts", "test/proxy/downloads/pack_urls_test.ts"],
  },
  {
    name: "signing/no-expiry",
    file: "src/proxy/core/signing.ts",
    from: "if (!Number.isSafeInteger(expires) || expires < nowSeconds) return false;",
    to: "if (!Number.isSafeInteger(expires)) return false;",
    tests: ["test/proxy/core/signing_test.ts", "test/proxy/downloads/pack_urls_test.ts"],
  },
  {
    name: "signing/expiry-not-in-message",
    file: "src/proxy/core/signing.ts",
    from: "return encoder.encode(`${path}\\n${expires}`);",
    to: "return encoder.encode(`${path}\\n`);",
    tests: ["test/proxy/core/signing_test.ts", "test/proxy/downloads/pack_urls_test.ts"],
  },
  {
    name: "pack_urls/index-signed-as-itself",
    file: "src/proxy/downloads/pack_urls.ts",
    from: "if (!(await signer.verify(packPath(id, packFileOf(file)), exp, sig, nowSeconds))) {",
    to: "if (!(await signer.verify(packPath(id, file), exp, sig, nowSeconds)) && false) {",
    tests: ["test/proxy/downloads/pack_urls_test.ts"],
  },
  // The credential memo.
  {
    name: "auth_memo/key-without-repo",
    file: "src/proxy/origin/auth_memo.ts",
    from: 'const text = new TextEncoder().encode(`${repoId}\\n${authorization ?? ""}\\n`);',
    to: 'const text = new TextEncoder().encode(`${authorization ?? ""}\\n`);',
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "auth_memo/key-without-credential",
    file: "src/proxy/origin/auth_memo.ts",
    from: 'const text = new TextEncoder().encode(`${repoId}\\n${authorization ?? ""}\\n`);',
    to: "const text = new TextEncoder().encode(`${repoId}\\n`);",
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "auth_memo/ttl-inclusive",
    file: "src/proxy/origin/auth_memo.ts",
    from: "if (now - at < ttlMs && now >= at) return true;",
    to: "if (now - at <= ttlMs && now >= at) return true;",
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "auth_memo/forget-noop",
    file: "src/proxy/origin/auth_memo.ts",
    from: "  forget(key: string): void {\n    this.#accepted.delete(key);",
    to: "  forget(key: string): void {\n    void key;",
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "forwarding/refusal-keeps-memo",
    file: "src/proxy/origin/forwarding.ts",
    from: "else if (status === 401 || status === 403) ctx.authMemo.forget(key);",
    to: "",
    tests: ["test/proxy/origin/auth_memo_test.ts"],
  },
  {
    name: "forwarding/any-answer-remembered",
    file: "src/proxy/origin/forwarding.ts",
    from: "if (status === 200) ctx.authMemo.remember(key, ctx.deps.clock.now());",
    to: "if (status < 500) ctx.authMemo.remember(key, ctx.deps.clock.now());",
    tests: ["test/proxy/origin/auth_memo_test.ts", EDGE_SUITE],
    filter: "private origin",
  },
  // The response cache's key and what it takes.
  ...(["deepen", "filter", "include-tag", "deepen-since", "tags"] as const).map((part) => ({
    name: `response_cache/key-without-${part}`,
    file: "src/proxy/core/response_cache.ts",
    from: {
      "deepen": "    `deepen ${args.deepen}`,\n",
      "filter": "    `filter ${args.filter}`,\n",
      "include-tag": "    `include-tag ${args.includeTag}`,\n",
      "deepen-since": "    `deepen-since ${args.deepenSince}`,\n",
      "tags": "    `tags ${tagDigest}`,\n",
    }[part],
    to: "",
    tests: ["test/proxy/core/response_cache_test.ts"],
  })),
  {
    name: "response_cache/key-without-wants",
    file: "src/proxy/core/response_cache.ts",
    from: "    ...[...new Set(args.wants)].sort().map((w) => `want ${w}`),\n",
    to: "",
    tests: ["test/proxy/core/response_cache_test.ts"],
  },
  {
    name: "response_cache/shallow-cacheable",
    file: "src/proxy/core/response_cache.ts",
    from: 'if (args.shallow.length > 0) return "client is shallow";',
    to: "",
    tests: ["test/proxy/core/response_cache_test.ts"],
  },
  // Incremental fetches through the response cache (test/proxy/incremental_fetch_test.ts).
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
  {
    name: "cached_fetch/no-cheap-check",
    file: "src/proxy/fetch/cached_fetch.ts",
    from:
      "if (!authorised && (ctx.responseCache.pending(storeKey) || await ctx.deps.store.head(storeKey))) {",
    to: "if (false) {",
    tests: [EDGE_SUITE],
    filter: "/cheap check|private origin/",
  },
  {
    name: "cached_fetch/cheap-check-trusts",
    file: "src/proxy/fetch/cached_fetch.ts",
    from:
      "rather than have it compute the pack again.\n    if (await originTagDigest(ctx, request, repo, req) === null) {",
    to: "rather than have it compute the pack again.\n    if (false) {",
    tests: [EDGE_SUITE],
    filter: "/private origin/",
  },
  {
    name: "cached_fetch/memo-trusts-anyone",
    file: "src/proxy/fetch/cached_fetch.ts",
    from: "    authorised = recentlyAuthorised(ctx, request, repo);",
    to: "    authorised = true;",
    tests: ["test/proxy/incremental_fetch_test.ts"],
    filter: "private",
  },
  {
    name: "cached_fetch/cheap-check-trusts-incremental",
    file: "src/proxy/fetch/cached_fetch.ts",
    from:
      "rather than have it compute the pack again.\n    if (await originTagDigest(ctx, request, repo, req) === null) {",
    to: "rather than have it compute the pack again.\n    if (false) {",
    tests: ["test/proxy/incremental_fetch_test.ts"],
    filter: "private",
  },
  // Which fetches get the snapshot by URI.
  {
    name: "eligibility/tag-may-be-left-out",
    file: "src/proxy/fetch/eligibility.ts",
    from: 'if (unwanted.some(([name]) => !name.startsWith("refs/heads/"))) return false;',
    to: "",
    tests: ["test/proxy/fetch/eligibility_test.ts", EDGE_SUITE],
    filter: "/eligibility|tag moved/",
  },
  {
    name: "eligibility/count-rule-off",
    file: "src/proxy/fetch/eligibility.ts",
    from: "return new Set(unwanted.map(([, oid]) => oid)).size <= newWants.size;",
    to: "return true;",
    tests: ["test/proxy/fetch/eligibility_test.ts"],
  },
  {
    name: "eligibility/partial-eligible",
    file: "src/proxy/fetch/eligibility.ts",
    from: 'if (args.filter !== null) return "partial clone";',
    to: "",
    tests: ["test/proxy/fetch/eligibility_test.ts"],
  },
  {
    name: "eligibility/deepen-since-eligible",
    file: "src/proxy/fetch/eligibility.ts",
    from: "args.deepen !== null || args.deepenSince !== null",
    to: "args.deepen !== null",
    tests: ["test/proxy/fetch/eligibility_test.ts"],
  },
  {
    name: "eligibility/haves-eligible",
    file: "src/proxy/fetch/eligibility.ts",
    from: '  if (args.haves.length > 0) return "incremental fetch";\n  if (args.shallow',
    to: "  if (args.shallow",
    tests: ["test/proxy/fetch/eligibility_test.ts"],
  },
  {
    name: "eligibility/missing-pack-served",
    file: "src/proxy/fetch/eligibility.ts",
    from: 'else if (snapshot.missingPack) reason = "snapshot pack missing";',
    to: "",
    tests: ["test/proxy/fetch/eligibility_test.ts"],
  },
  // Trusted edge indexes (gitedge clone --trust-edge-index).
  {
    name: "edge_index/trailer-unchecked",
    file: "src/client/edge_index.ts",
    from: "if (pack.trailer !== pack.computed || pack.computed !== hash) {",
    to: "if (pack.computed !== hash) {",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/announced-hash-unchecked",
    file: "src/client/edge_index.ts",
    from: "if (pack.trailer !== pack.computed || pack.computed !== hash) {",
    to: "if (pack.trailer !== pack.computed) {",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/idx-pack-checksum-unchecked",
    file: "src/client/edge_index.ts",
    from: "if (toHex(idx.subarray(end, end + h)) !== pack.computed) {",
    to: "if (false) {",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/idx-own-checksum-unchecked",
    file: "src/client/edge_index.ts",
    from: 'if (toHex(idx.subarray(end + h)) !== own) return "its own checksum does not match";',
    to: "",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/offsets-unbounded",
    file: "src/client/edge_index.ts",
    from: "if (offset < 12 || offset >= dataEnd) {",
    to: "if (offset < 12) {",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/object-count-unchecked",
    file: "src/client/edge_index.ts",
    from: "if (n !== pack.objects) return `it lists ${n} objects, the pack has ${pack.objects}`;",
    to: "",
    tests: [EDGE_INDEX],
  },
  // The Deno server's front.
  {
    name: "front/send-timeout-off",
    file: "edge/deno/front.ts",
    from:
      'if (conn.writingSince) return now - conn.writingSince > idleTimeoutMs ? "send" : undefined;',
    to: "if (conn.writingSince) return undefined;",
    tests: [FRONT],
  },
  {
    name: "front/header-timeout-off",
    file: "edge/deno/front.ts",
    from: 'if (conn.phase === "headers" && now - conn.since > headerTimeoutMs) return "header";',
    to: "",
    tests: [FRONT],
    filter: "header timeout",
  },
  {
    name: "front/idle-timeout-off",
    file: "edge/deno/front.ts",
    from: 'if (conn.phase === "waiting" && now - quietSince > idleTimeoutMs) return "idle";',
    to: "",
    tests: [FRONT],
    filter: "idle timeout",
  },
  // Snapshot builds carried across invocations.
  {
    name: "snapshot/abandon-keeps-packs",
    file: "src/proxy/snapshots/snapshot.ts",
    from: "    await this.#deleteUnder(`${packPrefix(state.repo)}${state.id}-`);\n",
    to: "",
    tests: [BUILD_STEPS],
  },
  {
    name: "snapshot/abandon-keeps-segments",
    file: "src/proxy/snapshots/snapshot.ts",
    from:
      "  async abandon(state: BuildState): Promise<void> {\n    await this.#deleteUnder(tmpPrefix(state.repo, state.id));\n",
    to: "  async abandon(state: BuildState): Promise<void> {\n",
    tests: [BUILD_STEPS],
  },
  {
    name: "snapshot/begin-keeps-leftovers",
    file: "src/proxy/snapshots/snapshot.ts",
    from: "    await this.#deleteUnder(tmpPrefix(repo));\n",
    to: "",
    tests: [BUILD_STEPS],
  },
  {
    name: "repo_snapshots/attempts-not-reset",
    file: "src/proxy/snapshots/repo_snapshots.ts",
    from: "await storage.put(BUILD_KEY, { ...pending, state: progress.state, attempts: 0 });",
    to: "await storage.put(BUILD_KEY, { ...pending, state: progress.state });",
    tests: [BUILD_STEPS],
  },
  {
    name: "repo_snapshots/failed-step-not-abandoned",
    file: "src/proxy/snapshots/repo_snapshots.ts",
    from: "      await builder.abandon(pending.state).catch(() => {});\n      await storage.delete",
    to: "      await storage.delete",
    tests: [BUILD_STEPS],
  },
  {
    name: "repo_snapshots/retries-forever",
    file: "src/proxy/snapshots/repo_snapshots.ts",
    from: "if (pending.attempts < MAX_STEP_ATTEMPTS) {",
    to: "if (pending.attempts < 1000) {",
    tests: [BUILD_STEPS],
  },
  // Packfile downloads of gitedge clone.
  {
    name: "packfile_download/truncation-unchecked",
    file: "src/client/packfile_download.ts",
    from: "if (this.#total !== undefined && this.#received < this.#total) {",
    to: "if (false) {",
    tests: DOWNLOADS,
  },
  {
    name: "ranged_response/206-before-offset",
    file: "src/client/ranged_response.ts",
    from: "if (range.start !== received) {",
    to: "if (range.start > received) {",
    tests: ["test/client/fetch_packfiles_test.ts"],
  },
  {
    name: "ranged_response/206-after-offset",
    file: "src/client/ranged_response.ts",
    from: "if (range.start !== received) {",
    to: "if (range.start < received) {",
    tests: ["test/client/fetch_packfiles_test.ts"],
  },
  {
    name: "packfile_download/hash-unchecked-retried",
    file: "src/client/packfile_download.ts",
    from: "if (error instanceof VerificationError) throw error;",
    to: "",
    tests: ["test/client/fetch_packfiles_test.ts"],
  },
  // Request parsing bounds and repository paths.
  {
    name: "request_body/no-byte-cap",
    file: "src/proxy/origin/request_body.ts",
    from:
      "if (taken + n > max) throw new RequestTooLargeError(`request body exceeds ${max} bytes`);",
    to: "",
    tests: ["test/proxy/fuzz_http_test.ts", EDGE_SUITE],
    filter: "/413|fuzz|oversized/",
  },
  {
    name: "repo/dot-segments-allowed",
    file: "src/proxy/core/repo.ts",
    from: 'const badSegment = (s: string) => s === "" || s === "." || s === ".." || hasBadChar(s);',
    to: 'const badSegment = (s: string) => s === "" || hasBadChar(s);',
    tests: ["test/proxy/core/repo_test.ts"],
  },
  {
    name: "repo/any-host",
    file: "src/proxy/core/repo.ts",
    from: "if (!config.allowHosts.includes(host)) {",
    to: "if (false) {",
    tests: ["test/proxy/core/repo_test.ts"],
  },
  // Plain clones streamed from the snapshot (fetch_plan.ts, snapshot_stream.ts, pack_join.ts).
  {
    name: "snapshot_stream/unauthorised",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "input.snapshotPlainClones && input.recentlyAuthorised && streamFrom &&",
    to: "input.snapshotPlainClones && streamFrom &&",
    tests: [STREAM, "test/proxy/fetch/fetch_plan_test.ts", EDGE_SUITE],
    filter: "/private|fetch plan/",
  },
  {
    name: "snapshot_stream/setting-ignored",
    file: "src/proxy/fetch/git_routes.ts",
    from: "const plainClones = ctx.deps.config.snapshotPlainClones;",
    to: "const plainClones = true;",
    tests: [STREAM],
    filter: "/snapshotPlainClones off/",
  },
  {
    name: "snapshot_stream/layers-joined",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "if (manifest.layers.length !== 1 || manifest.layers[0].length === 0) return false;",
    to: "if (manifest.layers.length < 1 || manifest.layers[0].length === 0) return false;",
    tests: [STREAM],
    filter: "/several layers/",
  },
  {
    name: "snapshot_stream/wants-a-subset",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "return wants.size === tips.size && [...wants].every((w) => tips.has(w));",
    to: "return [...wants].every((w) => tips.has(w));",
    tests: [STREAM],
    filter: "/take today's path/",
  },
  {
    name: "snapshot_stream/without-ofs-delta",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "args.ofsDelta && args.wants.length > 0",
    to: "args.wants.length > 0",
    tests: ["test/proxy/fetch/fetch_plan_test.ts"],
  },
  {
    name: "snapshot_stream/error-ends-with-flush",
    file: "src/proxy/fetch/streamed_fetch.ts",
    from:
      'controller.enqueue(encodeSidebandText(BAND_ERROR, "gitedge: the snapshot pack failed"));',
    to: "controller.enqueue(FLUSH_PKT);",
    tests: [STREAM],
    filter: "/side-band packets/",
  },
  {
    name: "pack_join/trailer-of-zeros",
    file: "src/git/pack_join.ts",
    from: "controller.enqueue(hash.digest());",
    to: "controller.enqueue(new Uint8Array(hash.digest().length));",
    tests: [EDGE_SUITE],
    filter: "/plain clone gets one pack/",
  },
  {
    name: "pack_join/sha1-always",
    file: "src/git/pack_join.ts",
    from: 'const hash = format === "sha1" ? sha1.create() : sha256.create();',
    to: "const hash = sha1.create();",
    tests: [STREAM],
    filter: "/SHA-256/",
  },
  // This script's own restore (test/ci_mutants_test.ts).
  {
    name: "mutants/no-restore",
    file: ".ci/mutants.ts",
    from: "  } finally {\n    await Deno.writeTextFile(file, original);\n  }",
    to: "  } finally {\n    void original;\n  }",
    tests: ["test/ci_mutants_test.ts"],
  },
];

/** Applies `m` to `text`: the mutated text, or null when `m.from` is not there exactly once. */
export function mutate(text: string, m: Pick<Mutant, "from" | "to">): string | null {
  const at = text.indexOf(m.from);
  if (at < 0 || text.indexOf(m.from, at + 1) >= 0) return null;
  return text.slice(0, at) + m.to + text.slice(at + m.from.length);
}

/**
 * Runs `fn` with `file` holding `mutated`; the original text is written back when `fn` settles,
 * whatever it does.
 */
export async function withMutation<T>(
  file: string,
  mutated: string,
  fn: () => Promise<T>,
): Promise<T> {
  const original = await Deno.readTextFile(file);
  await Deno.writeTextFile(file, mutated);
  try {
    return await fn();
  } finally {
    await Deno.writeTextFile(file, original);
  }
}

/** Files of the checkout as they are now (tracked and untracked, not ignored). */
async function checkoutFiles(root: string): Promise<string[]> {
  const out = await new Deno.Command("git", {
    args: ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    cwd: root,
    stdout: "piped",
  }).output();
  if (!out.success) throw new Error("git ls-files failed");
  return new TextDecoder().decode(out.stdout).split("\0").filter(Boolean);
}

/** A copy of the checkout at `root` in a new temporary directory (node_modules linked). */
export async function copyCheckout(root: string): Promise<string> {
  const copy = await Deno.makeTempDir({ prefix: "gitedge-mutants-" });
  for (const file of await checkoutFiles(root)) {
    const stat = await Deno.lstat(`${root}/${file}`).catch(() => null);
    if (!stat?.isFile) continue; // deleted in the worktree, or a link
    const target = `${copy}/${file}`;
    await Deno.mkdir(target.slice(0, target.lastIndexOf("/")), { recursive: true });
    await Deno.copyFile(`${root}/${file}`, target);
  }
  await Deno.symlink(`${root}/node_modules`, `${copy}/node_modules`).catch(() => {});
  return copy;
}

/** `shared/tools/modern-git.sh` above `root`, which the copy (elsewhere) cannot find itself. */
async function modernGitScript(root: string): Promise<string | undefined> {
  for (let dir = root; dir !== "/" && dir !== ""; dir = dir.slice(0, dir.lastIndexOf("/")) || "/") {
    const candidate = `${dir}/shared/tools/modern-git.sh`;
    if (await Deno.stat(candidate).then(() => true, () => false)) return candidate;
  }
  return undefined;
}

/** Runs `m`'s tests in `copy` with the mutant applied. */
async function runMutant(
  copy: string,
  m: Mutant,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<{ outcome: Outcome; seconds: number; tail: string }> {
  const file = `${copy}/${m.file}`;
  const mutated = mutate(await Deno.readTextFile(file), m);
  if (mutated === null) {
    return { outcome: "stale", seconds: 0, tail: "original text not found once" };
  }
  const started = performance.now();
  return await withMutation(file, mutated, async () => {
    const args = ["-n", "10", Deno.execPath(), "test", "--allow-all", "--no-check"];
    if (m.filter) args.push("--filter", m.filter);
    const child = new Deno.Command("nice", {
      args: [...args, ...m.tests],
      cwd: copy,
      env: { ...env, NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        child.kill("SIGKILL");
      } catch { /* ended */ }
    }, timeoutMs);
    const out = await child.output().finally(() => clearTimeout(timer));
    const seconds = (performance.now() - started) / 1000;
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    const tail = text.split("\n").filter((l) => /FAILED|ok \||failed|error:/.test(l)).slice(-8)
      .join("\n");
    if (timedOut) return { outcome: "timeout", seconds, tail };
    if (/filtered out/.test(text) && /\b0 passed\b/.test(text) && out.success) {
      return { outcome: "stale", seconds, tail: `no test matched: ${tail}` };
    }
    return { outcome: out.success ? "survived" : "caught", seconds, tail };
  });
}

function parseArgs(argv: string[]) {
  const opts = {
    only: [] as string[],
    list: false,
    timeoutSeconds: 600,
    tests: undefined as string[] | undefined,
    filter: undefined as string | undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--only") opts.only.push(...argv[++i].split(","));
    else if (a.startsWith("--only=")) opts.only.push(...a.slice(7).split(","));
    else if (a === "--list") opts.list = true;
    else if (a === "--timeout") opts.timeoutSeconds = Number(argv[++i]);
    else if (a === "--tests") opts.tests = argv[++i].split(",");
    else if (a === "--filter") opts.filter = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  return opts;
}

async function main(): Promise<number> {
  const opts = parseArgs(Deno.args);
  const names = new Set(MUTANTS.map((m) => m.name));
  if (names.size !== MUTANTS.length) throw new Error("mutant names must be unique");
  const chosen = MUTANTS.filter((m) =>
    opts.only.length === 0 || opts.only.some((o) => m.name.includes(o))
  ).map((m) => ({
    ...m,
    tests: opts.tests ?? m.tests,
    filter: opts.tests || opts.filter ? opts.filter : m.filter,
  }));
  if (opts.list) {
    const root = new URL("..", import.meta.url).pathname;
    let stale = 0;
    for (const m of chosen) {
      const applies = mutate(await Deno.readTextFile(`${root}${m.file}`), m) !== null;
      if (!applies) stale++;
      console.log(`${applies ? "ok   " : "STALE"} ${m.name}\t${m.file}\t${m.tests.join(" ")}`);
    }
    return stale === 0 ? 0 : 1;
  }
  if (chosen.length === 0) {
    console.error("no mutant matches --only");
    return 2;
  }
  const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
  const copy = await copyCheckout(root);
  const cleanup = () => {
    try {
      Deno.removeSync(copy, { recursive: true });
    } catch { /* gone */ }
  };
  const onSignal = () => {
    cleanup();
    Deno.exit(130);
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  const env: Record<string, string> = {};
  const script = await modernGitScript(root);
  if (script && !Deno.env.get("GITEDGE_MODERN_GIT_SCRIPT")) env.GITEDGE_MODERN_GIT_SCRIPT = script;
  const counts: Record<Outcome, number> = { caught: 0, survived: 0, stale: 0, timeout: 0 };
  try {
    for (const m of chosen) {
      const r = await runMutant(copy, m, env, opts.timeoutSeconds * 1000);
      counts[r.outcome]++;
      console.log(`${r.outcome.padEnd(8)} ${m.name} (${r.seconds.toFixed(0)} s)`);
      if (r.outcome !== "caught") console.log(`         ${r.tail.replaceAll("\n", "\n         ")}`);
    }
  } finally {
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
    cleanup();
  }
  console.log(
    `mutants: ${chosen.length} run, ${counts.caught} caught, ${counts.survived} survived, ` +
      `${counts.timeout} timed out, ${counts.stale} stale`,
  );
  return counts.survived + counts.stale + counts.timeout === 0 ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main());
