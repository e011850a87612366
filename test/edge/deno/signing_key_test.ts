/**
 * `gitedge serve`'s signing key file: created once with mode 0600 in a store that need not
 * exist yet, the same key on every later start (also when starts race), a key too short to sign
 * with replaced, no temporary file left.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { tempDir } from "../../support/git.ts";
import { loadSigningKey } from "../../../edge/deno/signing_key.ts";

Deno.test("loadSigningKey: created 0600 on first start, kept after, raced starts agree", async () => {
  await using dir = await tempDir();
  const store = `${dir.path}/new/store`;
  const first = await loadSigningKey(store);
  assertEquals(first.byteLength, 32);
  assertEquals((await Deno.stat(`${store}/signing.key`)).mode! & 0o777, 0o600);
  assertEquals(await loadSigningKey(store), first, "the same key on the next start");
  const raced = `${dir.path}/raced`;
  const keys = await Promise.all(Array.from({ length: 8 }, () => loadSigningKey(raced)));
  for (const key of keys) assertEquals(key, keys[0], "every racing start gets the kept key");
  assertEquals(await Deno.readFile(`${raced}/signing.key`), keys[0]);
  const names = (await Array.fromAsync(Deno.readDir(raced))).map((e) => e.name);
  assertEquals(names, ["signing.key"], "no temporary file left");
});

Deno.test("loadSigningKey: a key file too short to sign with is replaced", async () => {
  await using dir = await tempDir();
  await Deno.writeFile(`${dir.path}/signing.key`, new Uint8Array(15).fill(7));
  const key = await loadSigningKey(dir.path);
  assertEquals(key.byteLength, 32);
  assertEquals(await Deno.readFile(`${dir.path}/signing.key`), key);
  const kept = new Uint8Array(16).fill(9);
  await Deno.writeFile(`${dir.path}/signing.key`, kept);
  assert((await loadSigningKey(dir.path)).every((b) => b === 9), "16 bytes are enough: kept");
});
