/** Mutants: limits on memory and disk (issue #35): verified store writes, readiness, ls-refs ahead. */
import type { Mutant } from "./mutant.ts";

const FULL_DISK = "test/edge/deno/full_disk_test.ts";

export const LIMITS_MUTANTS: Mutant[] = [
  {
    name: "limits/store-write-unchecked",
    file: "edge/deno/fs_store.ts",
    from: "        at += n;",
    to: "        at = value.byteLength;",
    tests: [FULL_DISK],
    filter: "verified writes",
  },
  {
    name: "limits/store-size-unverified",
    file: "edge/deno/fs_store.ts",
    from: "  if (onDisk !== size) {",
    to: "  if (onDisk < 0) {",
    tests: [FULL_DISK],
    filter: "verified writes",
  },
  {
    name: "limits/readiness-tiny-probe",
    file: "src/proxy/ops/health.ts",
    from: "export const STORE_PROBE_BYTES = 64 * 1024;",
    to: "export const STORE_PROBE_BYTES = 16;",
    tests: [FULL_DISK],
    filter: "readiness on a full disk",
  },
];
