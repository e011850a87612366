/**
 * Mutants: the mirror's update from the origin (edge/deno/mirror.ts: one fetch named by the
 * caller's listing) and the listing that starts it (src/proxy/fetch/mirror_ahead.ts).
 */
import type { Mutant } from "./mutant.ts";

const COST = "test/edge/deno/mirror_origin_cost_test.ts";
const JOIN = "test/proxy/mirror/mirror_update_join_test.ts";
const HOST = "test/edge/deno/mirror_host_update_test.ts";
const HEAL = "test/edge/deno/mirror_heal_test.ts";

export const MIRROR_UPDATE_MUTANTS: Mutant[] = [
  {
    // The update's pack indexed straight into the mirror: a full disk leaves its partial pack.
    name: "mirror_update/no-quarantine",
    file: "edge/deno/mirror.ts",
    from: "        GIT_OBJECT_DIRECTORY: quarantine,\n",
    to: "",
    tests: [HEAL],
    filter: "/disk filling up/",
  },
  {
    name: "mirror_update/quarantine-kept",
    file: "edge/deno/mirror.ts",
    from: "      await Deno.remove(quarantine, { recursive: true }).catch(() => {});",
    to: "",
    tests: [HEAL],
    filter: "/disk filling up/",
  },
  {
    name: "mirror_update/startup-keeps-partial-packs",
    file: "edge/deno/mirror.ts",
    from: "removed += await dropTemporaries(`${this.#dir}/${e.name}/objects`);",
    to: "removed += 0;",
    tests: [HEAL],
    filter: "/at start-up/",
  },
  {
    // A refused credential's update taken for the origin's word: its fetch served from the mirror.
    name: "mirror_update/refused-update-vouches",
    file: "src/proxy/fetch/mirror_ahead.ts",
    from: "noteFetchVerdict(ctx, request, repo, status, askedAt)",
    to: "noteFetchVerdict(ctx, request, repo, 200, askedAt)",
    tests: [COST],
    filter: "/private origin/",
  },
  {
    name: "mirror_update/listing-not-read",
    file: "src/proxy/fetch/git_routes.ts",
    from: 'const res = command === "ls-refs" ? listingSeen(ctx, request, repo, relayed) : relayed;',
    to: "const res = relayed;",
    tests: [COST],
    filter: "/depth-1|new state/",
  },
  {
    name: "mirror_update/fetch-does-not-wait",
    file: "src/proxy/fetch/mirror_fetch.ts",
    from: "  await mirrors.running(repo);\n",
    to: "",
    tests: [COST],
    filter: "/depth-1|new state/",
  },
  {
    name: "mirror_update/own-listing-always",
    file: "edge/deno/mirror.ts",
    from: "const listing = hint.refs ?? await this.#lsRefs(repo, auth, signal);",
    to: "const listing = await this.#lsRefs(repo, auth, signal);",
    tests: [COST],
    filter: "/depth-1|new state/",
  },
  {
    name: "mirror_update/no-haves",
    file: "edge/deno/mirror.ts",
    from: "        ...[...new Set(haves)].map((h) => `have ${h}`),\n",
    to: "",
    tests: [COST],
    filter: "/depth-1/",
  },
  {
    name: "mirror_update/refs-not-set",
    file: "edge/deno/mirror.ts",
    from: "if (present(oid) && current.get(ref) !== oid) lines.push(",
    to: "if (false) lines.push(",
    tests: [COST],
    filter: "/depth-1/",
  },
  {
    // A lazy fetch's info/refs sends an ls-refs ahead that nothing uses.
    name: "mirror_update/lazy-fetch-gets-ls-refs-ahead",
    file: "src/proxy/origin/ls_refs_ahead.ts",
    from: "if (partial !== undefined && now - partial <= LAZY_MS) {",
    to: "if (false) {",
    tests: [COST],
    filter: "/blobless/",
  },
  {
    // A request that joined another caller's run takes the mirror for damaged when its wants are
    // still missing.
    name: "mirror_update/joined-run-counts-as-own",
    file: "src/proxy/mirror/mirrors.ts",
    from: "      if (ran) {\n        // This call's own update",
    to: "      {\n        // This call's own update",
    tests: [JOIN],
  },
  {
    // A request that joined a refused caller's update falls back instead of asking with its own.
    name: "mirror_update/joined-failure-is-final",
    file: "src/proxy/mirror/mirrors.ts",
    from: "if (ran) return { ready: false, reason: `update failed: ${message(error)}` };",
    to: "return { ready: false, reason: `update failed: ${message(error)}` };",
    tests: [JOIN],
  },
  {
    // An update on its own listing keeps branches and tags the origin deleted.
    name: "mirror_update/no-prune",
    file: "edge/deno/mirror.ts",
    from: "    if (prune) {",
    to: "    if (false) {",
    tests: [HOST],
  },
  {
    // The mirror's refs forgotten when it changes: a sync skipped against a stale listing.
    name: "mirror_update/synced-kept-over-discard",
    file: "src/proxy/mirror/mirrors.ts",
    from: "    this.#synced.delete(repoId);\n    this.discards++;",
    to: "    this.discards++;",
    tests: [JOIN],
  },
  {
    name: "mirror_update/damaged-kept",
    file: "src/proxy/mirror/mirrors.ts",
    from: "        if (error instanceof MirrorDamagedError) {",
    to: "        if (false) {",
    tests: [JOIN],
  },
];
