/** Mutants: the one classification of a fetch, the pin without a second plan, ranged responses. */
import { EDGE_SUITE, type Mutant } from "./mutant.ts";

export const HOUSE_MUTANTS: Mutant[] = [
  {
    name: "house/answer-sha1-trailer-for-sha256",
    file: "src/proxy/fetch/answered_fetch.ts",
    from: 'format === "sha256" ? sha256(header) : sha1(header)',
    to: "sha1(header)",
    tests: [EDGE_SUITE],
    filter: "/SHA-256/",
  },
  {
    name: "house/answer-format-rule-off",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "if (!fetch.complete || !sameObjectFormat(fetch, manifest)) return false;",
    to: "if (!fetch.complete) return false;",
    tests: ["test/proxy/fetch/fetch_plan_test.ts"],
  },
  {
    name: "house/handed-out-unpinned",
    file: "src/proxy/fetch/git_routes.ts",
    from: "  ctx.registry.pin(repo, until, epoch.local);\n",
    to: "",
    tests: ["test/edge/deno/store_eviction_test.ts"],
  },
  {
    name: "house/if-range-ignored",
    file: "src/proxy/downloads/ranged.ts",
    from: "asked && (!ifRange || ifRange === obj.etag) ? asked : undefined",
    to: "asked",
    tests: ["test/proxy/downloads/ranged_test.ts"],
  },
];
