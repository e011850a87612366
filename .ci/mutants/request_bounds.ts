/** Mutants: Request parsing bounds and repository paths. */
import { EDGE_SUITE, type Mutant } from "./mutant.ts";

export const REQUEST_BOUNDS_MUTANTS: Mutant[] = [
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
];
