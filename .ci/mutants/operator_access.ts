/** Mutants: the admin token check (Bearer, and Basic for the operator's page in a browser). */
import type { Mutant } from "./mutant.ts";

const TESTS = ["test/proxy/ops/admin_auth_test.ts"];

export const OPERATOR_ACCESS_MUTANTS: Mutant[] = [
  {
    name: "admin_auth/basic-everywhere",
    file: "src/proxy/ops/admin_auth.ts",
    from: 'if (scheme === "basic" && opts.basic) {',
    to: 'if (scheme === "basic") {',
    tests: TESTS,
  },
  {
    name: "admin_auth/user-as-password",
    file: "src/proxy/ops/admin_auth.ts",
    from: "return colon < 0 ? null : text.slice(colon + 1);",
    to: "return colon < 0 ? null : text.slice(0, colon);",
    tests: TESTS,
  },
  {
    name: "admin_auth/prefix-accepted",
    file: "src/proxy/ops/admin_auth.ts",
    from: "let diff = a.length ^ b.length;",
    to: "let diff = 0;",
    tests: TESTS,
  },
  {
    name: "admin_auth/empty-token-admits",
    file: "src/proxy/ops/admin_auth.ts",
    from: "if (!token || !authorization || authorization.length > MAX_AUTHORIZATION) return false;",
    to: "if (!authorization || authorization.length > MAX_AUTHORIZATION) return false;",
    tests: TESTS,
  },
];
