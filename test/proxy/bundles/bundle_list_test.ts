import { layerBundles } from "../../../src/proxy/bundles/bundle_list.ts";
import type { Manifest, SnapshotPack } from "../../../src/proxy/core/manifest.ts";
import { assertEquals } from "../../support/assert.ts";

const A = "a".repeat(40);
const B = "b".repeat(40);
const C = "c".repeat(40);

function pack(file: string): SnapshotPack {
  return { hash: A, key: `repos/${"0".repeat(32)}/packs/${file}`, size: 100, objects: 3 };
}

const manifest: Manifest = {
  version: 1,
  originUrl: "http://origin/r.git",
  tips: { "refs/heads/main": C, "refs/tags/v1": B },
  layers: [[pack("l1-aaaa-0.pack"), pack("l1-aaaa-1.pack")], [pack("l2-bbbb-0.pack")]],
  builtAt: 20,
  layerMeta: [
    { tips: { "refs/heads/main": A, "refs/heads/old": A }, builtAt: 10 },
    { tips: { "refs/heads/main": C, "refs/tags/v1": B }, builtAt: 20 },
  ],
};

Deno.test("each layer is a bundle: its tips, the previous layer's as prerequisites", () => {
  assertEquals(layerBundles(manifest).map((b) => [b.name, b.creationToken, b.header]), [
    ["l1-aaaa-0", 10, {
      objectFormat: "sha1",
      prerequisites: [],
      refs: manifest.layerMeta![0].tips,
    }],
    ["l2-bbbb-0", 20, {
      objectFormat: "sha1",
      prerequisites: [A],
      refs: manifest.layerMeta![1].tips,
    }],
  ]);
  assertEquals(layerBundles(manifest)[0].packs.length, 2, "the first layer's packs, joined");
});

Deno.test("no bundles from a manifest that does not say what every layer was built for", () => {
  const { layerMeta: _, ...old } = manifest;
  assertEquals(layerBundles(old), [], "written before layers were recorded");
  assertEquals(layerBundles({ ...manifest, layerMeta: manifest.layerMeta!.slice(1) }), [], "short");
  assertEquals(layerBundles({ ...manifest, layers: [], layerMeta: [] }), [], "empty repository");
  const odd = { ...manifest, layers: [[pack("UPPER.pack")], manifest.layers[1]] };
  assertEquals(layerBundles(odd), [], "packs not named as the builder names them");
});
