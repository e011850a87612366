/**
 * edge/deno/pack_index_builder.ts on its own: git's index of a stored pack goes into the store; a
 * failing or hanging `git index-pack` fails the index (killed at its deadline) and stores nothing.
 */
import { gitPackIndexBuilder } from "../../../edge/deno/pack_index_builder.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { assertEquals, assertMatch, assertRejects } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";

const KEY = "repos/0123/packs/p.pack";
const IDX = "repos/0123/packs/p.idx";

/** A store holding one small real pack under {@link KEY}. */
async function storeWithPack(dir: string): Promise<FsPackStore> {
  await git(["init", "-q", "--bare", `${dir}/r.git`]);
  const blob = (await git(["hash-object", "-w", "--stdin"], {
    cwd: `${dir}/r.git`,
    stdin: new TextEncoder().encode("hello\n"),
  })).trim();
  const store = new FsPackStore(`${dir}/store`);
  await store.put(KEY, new Blob([await packBytes(`${dir}/r.git`, blob)]).stream());
  return store;
}

async function packBytes(repo: string, oid: string): Promise<Uint8Array<ArrayBuffer>> {
  const out = await new Deno.Command("git", {
    args: ["pack-objects", "--stdout"],
    cwd: repo,
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const writer = out.stdin.getWriter();
  await writer.write(new TextEncoder().encode(`${oid}\n`));
  await writer.close();
  const { stdout } = await out.output();
  return new Uint8Array(stdout);
}

async function fakeGit(dir: string, body: string): Promise<string> {
  const path = `${dir}/fake-git`;
  await Deno.writeTextFile(path, `#!/bin/sh\n${body}\n`);
  await Deno.chmod(path, 0o755);
  return path;
}

Deno.test("the index of a stored pack is git's, put into the store", async () => {
  await using dir = await tempDir();
  const store = await storeWithPack(dir.path);
  await gitPackIndexBuilder(store)(KEY, IDX, "sha1");
  const stored = await Deno.readFile(store.pathOf(IDX));
  assertEquals(Array.from(stored.subarray(0, 8)), [0xff, 0x74, 0x4f, 0x63, 0, 0, 0, 2]);
  assertEquals(await store.head(KEY.replace(/\.pack$/, ".rev")), null, "no .rev beside it");
});

Deno.test("a failing index-pack fails the index with its message; nothing stored", async () => {
  await using dir = await tempDir();
  const store = await storeWithPack(dir.path);
  const git = await fakeGit(dir.path, "echo 'fatal: pack is broken' >&2; exit 128");
  const error = await assertRejects(() => gitPackIndexBuilder(store, { git })(KEY, IDX, "sha1"));
  assertMatch(error.message, /git index-pack of .* failed: fatal: pack is broken/);
  assertEquals(await store.head(IDX), null);
});

Deno.test("a hanging index-pack is killed at its deadline; nothing stored", async () => {
  await using dir = await tempDir();
  const store = await storeWithPack(dir.path);
  // Without the kill, index-pack would end after the sleep and leave `finished` behind.
  const git = await fakeGit(dir.path, `sleep 20 >/dev/null 2>&1; touch ${dir.path}/finished`);
  const error = await assertRejects(() =>
    gitPackIndexBuilder(store, { git, timeoutMs: 200 })(KEY, IDX, "sha1")
  );
  assertMatch(error.message, /took over \d+ ms; killed/);
  assertEquals(await Deno.stat(`${dir.path}/finished`).catch(() => null), null, "killed");
  assertEquals(await store.head(IDX), null);
});
