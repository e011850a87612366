import {
  entryKey,
  indexKeyOf,
  manifestKey,
  packKey,
  registryKey,
  seedsPrefix,
  stateKey,
  tmpPrefix,
} from "../../../src/proxy/core/store_layout.ts";
import { assertEquals } from "../../support/assert.ts";

Deno.test("the store layout: the keys stores already hold keep their names", () => {
  const id = "0123456789abcdef0123456789abcdef";
  assertEquals(manifestKey(id), `repos/${id}/manifest.json`);
  assertEquals(packKey(id, "b1-0.pack"), `repos/${id}/packs/b1-0.pack`);
  assertEquals(indexKeyOf(packKey(id, "b1-0.pack")), `repos/${id}/packs/b1-0.idx`);
  assertEquals(stateKey(id), `repos/${id}/state.json`);
  assertEquals([tmpPrefix(id), tmpPrefix(id, "b1")], [`repos/${id}/tmp/`, `repos/${id}/tmp/b1/`]);
  assertEquals(seedsPrefix(id), `repos/${id}/seeds/`);
  assertEquals(entryKey(id, "k"), `cache/${id}/k.resp`);
  assertEquals(registryKey(id), `registry/${id}.json`);
});
