/** Mutants: Packfile downloads of gitedge clone. */
import { DOWNLOADS, type Mutant } from "./mutant.ts";

export const DOWNLOADS_MUTANTS: Mutant[] = [
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
    tests: ["test/client/ranged_response_test.ts", "test/client/fetch_packfiles_test.ts"],
  },
  {
    name: "ranged_response/206-after-offset",
    file: "src/client/ranged_response.ts",
    from: "if (range.start !== received) {",
    to: "if (range.start < received) {",
    tests: ["test/client/ranged_response_test.ts", "test/client/fetch_packfiles_test.ts"],
  },
  {
    name: "packfile_download/hash-unchecked-retried",
    file: "src/client/packfile_download.ts",
    from: "if (error instanceof VerificationError) throw error;",
    to: "",
    tests: ["test/client/fetch_packfiles_test.ts"],
  },
];
