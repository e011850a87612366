/** Mutants: Which fetches get the snapshot by URI. */
import { EDGE_SUITE, type Mutant } from "./mutant.ts";

export const URI_ELIGIBILITY_MUTANTS: Mutant[] = [
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
];
