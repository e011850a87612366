import { emptyFetchArgs, type FetchArgs } from "../../../src/git/fetch_request.ts";
import {
  classifyFetch,
  coversSnapshot,
  rewriteDecision,
  type SnapshotView,
} from "../../../src/proxy/fetch/eligibility.ts";
import { assertEquals } from "../../support/assert.ts";

const oid = (c: string) => c.repeat(40);
const tips = {
  "refs/heads/main": oid("a"),
  "refs/heads/feature": oid("b"),
  "refs/tags/v1": oid("c"),
};

/** The decision for a fetch with `args` on an edge whose public URL has `scheme`. */
function decide(args: FetchArgs, scheme: string, view: SnapshotView | null) {
  const req = { command: "fetch", capabilities: [], args: [] };
  return rewriteDecision(classifyFetch(req, args, scheme), args.wants, view);
}

function fetchOf(wants: string[], more: Partial<FetchArgs> = {}): FetchArgs {
  return { ...emptyFetchArgs(), wants, packfileUris: ["https"], ...more };
}

Deno.test("eligibility: the snapshot must hold nothing the fetch did not ask for", () => {
  const all = [oid("a"), oid("b"), oid("c")];
  assertEquals(coversSnapshot(all, tips), true, "full clone");
  assertEquals(coversSnapshot([oid("a")], tips), false, "single-branch");
  assertEquals(coversSnapshot([oid("a"), oid("b")], tips), false, "--no-tags");
  assertEquals(coversSnapshot([oid("b")], { "refs/heads/b": oid("b") }), true, "only branch");
  // The origin moved: main went from a to d. A full clone wants d, b, c.
  assertEquals(coversSnapshot([oid("d"), oid("b"), oid("c")], tips), true, "full, main moved");
  assertEquals(coversSnapshot([oid("d")], tips), false, "single-branch, main moved");
  assertEquals(coversSnapshot([oid("d"), oid("b")], tips), false, "a tag is never left out");
  assertEquals(coversSnapshot([oid("d"), oid("c")], tips), false, "two tips out, one new want");
  // The tag moved: v1 went from c to e. The count rule alone would allow it (one tip out, one
  // new want), but the snapshot's c is an object the origin no longer sends for v1.
  assertEquals(coversSnapshot([oid("a"), oid("b"), oid("e")], tips), false, "a tag moved");
  assertEquals(
    coversSnapshot([oid("a"), oid("b"), oid("e")], { ...tips, "refs/tags/v1": oid("b") }),
    true,
    "a tag on a wanted branch tip is wanted through it",
  );
});

Deno.test("eligibility: request checks, then the snapshot; refresh when wants are unknown", () => {
  const all = [oid("a"), oid("b"), oid("c")];
  const view = { tips, packs: 2, missingPack: false };
  assertEquals(decide(fetchOf(all), "https", view), { reason: null, refresh: false });
  assertEquals(
    decide(fetchOf(all), "http", view).reason,
    "client did not ask for packfile-uris",
  );
  const shallow: Partial<FetchArgs>[] = [
    { deepen: 1 },
    { deepenSince: 1_700_000_000 },
    { deepenNot: ["refs/heads/feature"] },
    { shallow: [oid("a")] },
  ];
  for (const more of shallow) {
    assertEquals(
      decide(fetchOf(all, more), "https", view).reason,
      "shallow",
      JSON.stringify(more),
    );
  }
  assertEquals(
    decide(fetchOf(all, { filter: "blob:none" }), "https", view).reason,
    "partial clone",
  );
  assertEquals(
    decide(fetchOf(all, { haves: [oid("e")] }), "https", view).reason,
    "incremental fetch",
  );
  assertEquals(decide(fetchOf([oid("a")]), "https", view), {
    reason: "wants part of the snapshot",
    refresh: false,
  });
  assertEquals(decide(fetchOf(all), "https", null), {
    reason: "no snapshot",
    refresh: true,
  });
  assertEquals(decide(fetchOf(all), "https", { ...view, missingPack: true }), {
    reason: "snapshot pack missing",
    refresh: true,
  });
  assertEquals(decide(fetchOf([oid("d"), oid("b"), oid("c")]), "https", view), {
    reason: null,
    refresh: true,
  });
});
