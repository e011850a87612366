/** A mutant of `.ci/mutants.ts`, and the test files several lists share. */
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

export const EDGE_SUITE = "test/edge/deno/deno_edge_test.ts";
export const BUILD_STEPS = "test/proxy/build_steps_test.ts";
export const EDGE_INDEX = "test/client/edge_index_test.ts";
export const FRONT = "test/edge/deno/front_test.ts";
export const STREAM = "test/proxy/fetch/streamed_fetch_test.ts";
export const DOWNLOADS = [
  "test/client/fetch_packfiles_test.ts",
  "test/client/ranged_response_test.ts",
];
