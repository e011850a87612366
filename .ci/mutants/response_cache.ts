/** Mutants: The response cache's key and what it takes. */
import type { Mutant } from "./mutant.ts";

export const RESPONSE_CACHE_MUTANTS: Mutant[] = [
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
];
