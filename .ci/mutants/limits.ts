/** Mutants: limits on memory and disk (issue #35): verified store writes, readiness, ls-refs ahead. */
import type { Mutant } from "./mutant.ts";

const FULL_DISK = "test/edge/deno/full_disk_test.ts";
const AHEAD = "test/edge/deno/ls_refs_ahead_limits_test.ts";
const AHEAD_FILE = "src/proxy/origin/ls_refs_ahead.ts";

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

  {
    name: "limits/ahead-learns-refused",
    file: AHEAD_FILE,
    from:
      "      if (status === 200) this.#learn(memoKey, request, key, read, ctx.deps.clock.now());",
    to: "      this.#learn(memoKey, request, key, read, ctx.deps.clock.now());",
    tests: [AHEAD],
    filter: "anonymous",
  },
  {
    name: "limits/ahead-request-unbounded",
    file: AHEAD_FILE,
    from:
      "        if (size > MAX_LEARNED_REQUEST_BYTES) return { response: null, read: [...head, ...args] };",
    to: "",
    tests: [AHEAD],
    filter: "anonymous",
  },
  {
    name: "limits/ahead-answer-unchecked",
    file: AHEAD_FILE,
    from:
      "      if (contentType !== UPLOAD_PACK_RESULT_TYPE || !wellFormedListing(bytes)) return null;",
    to: "      if (contentType !== UPLOAD_PACK_RESULT_TYPE) return null;",
    tests: [AHEAD],
    filter: "cut short",
  },
  {
    name: "limits/ahead-always-trusted",
    file: AHEAD_FILE,
    from:
      "    this.#learned.set(at, { key, body, trusted: !prior || prior.key === key, at: now });",
    to: "    this.#learned.set(at, { key, body, trusted: true, at: now });",
    tests: [AHEAD],
    filter: "in turn",
  },

  {
    name: "limits/cache-tee-unbounded",
    file: "src/proxy/fetch/cached_fetch.ts",
    from: "  const [toClient, toStore] = windowedTee(answer.body, CACHE_COPY_WINDOW_BYTES);",
    to: "  const [toClient, toStore] = answer.body.tee();",
    tests: ["test/edge/deno/slow_reader_test.ts"],
  },
  {
    name: "limits/tee-window-ignored",
    file: "src/proxy/core/streams.ts",
    from: "      if ((copy.desiredSize ?? 0) < result.value.byteLength) {",
    to: "      if (false) {",
    tests: ["test/proxy/core/streams_test.ts"],
  },
  {
    name: "limits/unknown-repo-state-kept",
    file: "src/proxy/snapshots/in_process_coordinator.ts",
    from: "    if (this.#repos.get(repo.id) === s) this.#repos.delete(repo.id);",
    to: "    void s;",
    tests: ["test/edge/deno/unknown_repos_test.ts"],
  },

  {
    name: "limits/ahead-no-follow-ups",
    file: AHEAD_FILE,
    from: "    if (learned && live && !live.settled && live.request === learned.key) {",
    to: "    if (false) {",
    tests: [AHEAD],
    filter: "burst",
  },
];
