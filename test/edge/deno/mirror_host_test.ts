/**
 * The git side of the mirror (edge/deno/mirror.ts) on its own: how a caller's credential reaches
 * git, and that it goes nowhere but the origin.
 */
import { assert, assertEquals, assertRejects } from "../../support/assert.ts";
import { git, gitBytes, tempDir } from "../../support/git.ts";
import { GitMirrorHost } from "../../../edge/deno/mirror.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";

Deno.test("mirror host: an origin redirecting the update elsewhere: not followed, the credential goes nowhere else", async () => {
  await using dir = await tempDir();
  const seen: (string | null)[] = [];
  const elsewhere = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    seen.push(req.headers.get("authorization"));
    return new Response("no", { status: 404 });
  });
  const target = `http://127.0.0.1:${elsewhere.addr.port}`;
  const origin = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const url = new URL(req.url);
    return new Response(null, {
      status: 302,
      headers: { location: `${target}${url.pathname}${url.search}` },
    });
  });
  try {
    const host = new GitMirrorHost({ dir: dir.path, store: null as never });
    const repo = {
      id: "ab",
      path: "r.git",
      originUrl: `http://127.0.0.1:${origin.addr.port}/r.git`,
    };
    await git(["init", "-q", "--bare", `${dir.path}/ab.git`]);
    let failed = false;
    await host.update(repo, { headers: { authorization: "Basic c2VjcmV0" } }, []).catch(() => {
      failed = true;
    });
    assert(failed, "the update failed (the redirect was not followed)");
    // Not followed at all (curl would drop the header for another host:port; this is the
    // edge's own guarantee, whatever the curl).
    assertEquals(seen, []);
  } finally {
    await origin.shutdown();
    await elsewhere.shutdown();
  }
});

Deno.test("mirror host: a snapshot whose packs lack an object the tips reach seeds no mirror; a whole one does", async () => {
  await using dir = await tempDir();
  const src = `${dir.path}/src`;
  await git(["init", "-q", "--bare", src]);
  const work = `${dir.path}/work`;
  await git(["clone", "-q", src, work]);
  for (const name of ["a", "b"]) {
    await Deno.writeTextFile(`${work}/${name}.txt`, `${name}\n`.repeat(50));
    await git(["add", "-A"], { cwd: work });
    await git(["commit", "-q", "-m", name], { cwd: work });
  }
  const tip = (await git(["rev-parse", "HEAD"], { cwd: work })).trim();
  const lost = (await git(["rev-parse", "HEAD:a.txt"], { cwd: work })).trim();
  const all = (await git(["rev-list", "--objects", "HEAD"], { cwd: work })).split("\n")
    .map((l) => l.split(" ")[0]).filter((o) => o.length === 40);
  const store = new FsPackStore(`${dir.path}/store`);
  /** A one-pack snapshot of `objects` with `tip` as main. */
  const snapshot = async (name: string, objects: string[]): Promise<Manifest> => {
    const pack = await gitBytes(["pack-objects", "--stdout", "-q"], {
      cwd: work,
      stdin: new TextEncoder().encode(objects.join("\n") + "\n"),
    });
    const hash = [...pack.subarray(pack.length - 20)].map((b) => b.toString(16).padStart(2, "0"))
      .join("");
    const key = `repos/${name}/packs/p.pack`;
    await store.put(key, ReadableStream.from([pack]));
    return {
      version: 1,
      originUrl: "http://127.0.0.1:9/r.git",
      tips: { "refs/heads/main": tip },
      layers: [[{ hash, key, size: pack.length, objects: objects.length }]],
      builtAt: 0,
    };
  };
  const host = new GitMirrorHost({
    dir: `${dir.path}/mirrors`,
    store,
    pathOf: (key) => store.pathOf(key),
  });
  const broken = { id: "aa", path: "broken.git", originUrl: "http://127.0.0.1:9/r.git" };
  await assertRejects(
    async () => host.seed(broken, await snapshot("aa", all.filter((o) => o !== lost))),
    Error,
    lost,
  );
  assertEquals(await host.exists(broken), false, "no mirror");
  assertEquals(await host.list(), [], "nothing left behind");
  const whole = { id: "bb", path: "whole.git", originUrl: "http://127.0.0.1:9/r.git" };
  await host.seed(whole, await snapshot("bb", all));
  assert(await host.exists(whole), "seeded");
  // Copied from the store's file, not linked: a one-pack mirror keeps the pack it was seeded
  // with, and a second name would change the store's version of it (its inode's ctime).
  assertEquals((await Deno.stat(store.pathOf("repos/bb/packs/p.pack"))).nlink, 1, "not linked");
  assertEquals(await host.missing(whole, [tip, lost]), []);
  // A commit the mirror holds without its tree (what an update cut short between objects would
  // leave, were its objects written one by one): present, not whole, so not held; the refs'
  // history is whole, so the mirror is not damaged and the next update brings the rest.
  const absentTree = "e".repeat(40);
  const dangling = (await git(["hash-object", "-w", "-t", "commit", "--stdin"], {
    cwd: host.pathOf(whole),
    stdin: new TextEncoder().encode(
      `tree ${absentTree}\nauthor A <a@example.com> 0 +0000\n` +
        `committer A <a@example.com> 0 +0000\n\ncut short\n`,
    ),
  })).trim();
  await git(["cat-file", "-e", dangling], { cwd: host.pathOf(whole) });
  assert((await host.missing(whole, [tip, dangling])).includes(dangling), "a cut want is missing");
  assertEquals(await host.missing(whole, [tip]), [], "the refs' history is whole");
});
