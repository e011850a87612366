/** Mutants: the git mirror (src/proxy/mirror, fetch/mirror_fetch.ts, edge/deno/mirror.ts). */
import type { Mutant } from "./mutant.ts";

const E2E = "test/edge/deno/mirror_test.ts";
const PLAN = "test/proxy/fetch/fetch_plan_test.ts";
const UNIT = "test/proxy/mirror/mirrors_test.ts";

export const MIRROR_MUTANTS: Mutant[] = [
  {
    name: "mirror/no-origin-check",
    file: "src/proxy/fetch/mirror_fetch.ts",
    from: "const accepted = plan.askOrigin && !recentlyAuthorised(ctx, request, repo)",
    to: "const accepted = false && !recentlyAuthorised(ctx, request, repo)",
    tests: [E2E],
    filter: "/private/",
  },
  {
    name: "mirror/plan-never-asks",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "askOrigin: !input.recentlyAuthorised,",
    to: "askOrigin: false,",
    tests: [PLAN, E2E],
    filter: "/mirror/",
  },
  {
    name: "mirror/filters-the-origin-refuses",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "if (args.filter !== null && !originFilters) return false;",
    to: "",
    tests: [PLAN],
  },
  {
    name: "mirror/want-ref-to-mirror",
    file: "src/proxy/fetch/fetch_plan.ts",
    from:
      "if (args.wants.length === 0 || args.wantRefs.length > 0 || args.other.length > 0) return false;",
    to: "if (args.wants.length === 0 || args.other.length > 0) return false;",
    tests: [PLAN],
  },
  {
    name: "mirror/update-without-credential",
    file: "edge/deno/mirror.ts",
    from: "if (!/[\\r\\n]/.test(value)) headers.set(name, value);",
    to: "void value;",
    tests: [E2E],
    filter: "/private/",
  },
  {
    name: "mirror/no-single-flight",
    file: "src/proxy/mirror/mirrors.ts",
    from: "    if (running) return running;\n    const run = work()",
    to: "    void running;\n    const run = work()",
    tests: [UNIT, E2E],
    filter: "/five states|share one seed/",
  },
  {
    name: "mirror/serve-failed-run",
    file: "edge/deno/mirror.ts",
    from: "if (!status.success) {\n        return { ok: false",
    to: "if (false) {\n        return { ok: false",
    // A mirror damaged under its refs is found before upload-pack runs (Mirrors.ensure); a blob
    // missing under a tip is found by upload-pack alone (mirror_heal_test's corrupted mirror).
    tests: [E2E, "test/edge/deno/mirror_heal_test.ts"],
    filter: "/damaged|corrupted/",
  },
  {
    name: "mirror/claims-every-want",
    file: "edge/deno/mirror.ts",
    from: "return oids.filter((o) => !present.has(o));",
    to: "return oids.filter(() => false);",
    tests: [E2E],
    filter: "/depth-1/",
  },
  {
    name: "mirror/uris-line-to-upload-pack",
    file: "src/proxy/fetch/mirror_fetch.ts",
    from: 'const body = args.packfileUris ? withoutArg(call.sent, "packfile-uris") : call.sent;',
    to: "const body = call.sent;",
    tests: [E2E],
    filter: "/2.55/",
  },
  {
    name: "mirror/follows-redirects",
    file: "edge/deno/mirror.ts",
    from: 'redirect: "manual",',
    to: 'redirect: "follow",',
    tests: ["test/edge/deno/mirror_host_test.ts"],
    filter: "/not followed/",
  },
  {
    name: "mirror/kept-after-eviction",
    file: "src/proxy/app.ts",
    from: "onEvicted: deps.mirrors ? (id) => deps.mirrors!.discard(id) : undefined,",
    to: "onEvicted: undefined,",
    tests: [E2E],
    filter: "/store's cap/",
  },
  {
    name: "mirror/no-cap",
    file: "src/proxy/mirror/mirrors.ts",
    from: "    if (this.maxBytes <= 0) return;\n    const all",
    to: "    if (this.maxBytes >= 0) return;\n    const all",
    tests: [UNIT],
  },
  {
    name: "mirror/unbounded-serves",
    file: "src/proxy/mirror/mirrors.ts",
    from: "if (this.#serving >= this.#maxServes) return null;",
    to: "",
    tests: [UNIT],
  },
  {
    name: "mirror/hard-link-seed",
    file: "edge/deno/mirror.ts",
    from: "await Deno.copyFile(this.#pathOf(key), file);",
    to: "await Deno.link(this.#pathOf(key), file);",
    // The host test finds the store's pack with a second name (its link count) after a one-pack
    // seed; end to end the link changes the pack's version only when it lands in a later clock
    // tick than the pack's write.
    tests: ["test/edge/deno/mirror_host_test.ts"],
  },
  {
    name: "mirror/deepen-not-to-mirror",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "  if (args.deepenNot.length > 0) return false;\n",
    to: "",
    tests: [PLAN],
  },
];
