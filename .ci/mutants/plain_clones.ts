/** Mutants: Plain clones streamed from the snapshot (fetch_plan.ts, snapshot_stream.ts, pack_join.ts). */
import { EDGE_SUITE, type Mutant, STREAM } from "./mutant.ts";

export const PLAIN_CLONES_MUTANTS: Mutant[] = [
  {
    name: "snapshot_stream/unauthorised",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "input.snapshotPlainClones && input.recentlyAuthorised && streamFrom &&",
    to: "input.snapshotPlainClones && streamFrom &&",
    tests: [STREAM, "test/proxy/fetch/fetch_plan_test.ts", EDGE_SUITE],
    filter: "/private|fetch plan/",
  },
  {
    name: "snapshot_stream/setting-ignored",
    file: "src/proxy/fetch/git_routes.ts",
    from: "const plainClones = ctx.deps.config.snapshotPlainClones;",
    to: "const plainClones = true;",
    tests: [STREAM],
    filter: "/snapshotPlainClones off/",
  },
  {
    name: "snapshot_stream/layers-joined",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "if (manifest.layers.length !== 1 || manifest.layers[0].length === 0) return false;",
    to: "if (manifest.layers.length < 1 || manifest.layers[0].length === 0) return false;",
    tests: [STREAM],
    filter: "/several layers/",
  },
  {
    name: "snapshot_stream/wants-a-subset",
    file: "src/proxy/fetch/fetch_plan.ts",
    from: "return wants.size === tips.size && [...wants].every((w) => tips.has(w));",
    to: "return [...wants].every((w) => tips.has(w));",
    tests: [STREAM],
    filter: "/take today's path/",
  },
  {
    name: "snapshot_stream/without-ofs-delta",
    file: "src/proxy/fetch/eligibility.ts",
    from: "plainClone: !asksUris && shape === null && complete && args.ofsDelta,",
    to: "plainClone: !asksUris && shape === null && complete,",
    tests: ["test/proxy/fetch/fetch_plan_test.ts"],
  },
  {
    name: "snapshot_stream/error-ends-with-flush",
    file: "src/proxy/fetch/streamed_fetch.ts",
    from:
      'controller.enqueue(encodeSidebandText(BAND_ERROR, "gitedge: the snapshot pack failed"));',
    to: "controller.enqueue(FLUSH_PKT);",
    tests: [STREAM],
    filter: "/side-band packets/",
  },
  {
    name: "pack_join/trailer-of-zeros",
    file: "src/git/pack_join.ts",
    from: "controller.enqueue(hash.digest());",
    to: "controller.enqueue(new Uint8Array(hash.digest().length));",
    tests: [EDGE_SUITE],
    filter: "/plain clone gets one pack/",
  },
  {
    name: "pack_join/sha1-always",
    file: "src/git/pack_join.ts",
    from: 'const hash = format === "sha1" ? sha1.create() : sha256.create();',
    to: "const hash = sha1.create();",
    tests: [STREAM],
    filter: "/SHA-256/",
  },
];
