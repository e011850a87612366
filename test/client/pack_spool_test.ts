import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { PackSpool } from "../../src/client/pack_spool.ts";
import { IndexPackError } from "../../src/client/errors.ts";
import { git, tempDir } from "../support/git.ts";
import { makePackFixtures } from "../support/pack_fixtures.ts";

/** A repository with `objects/pack`, and one pack of about `size` bytes to spool into it. */
async function setUp(dir: string, size: number) {
  const gitDir = `${dir}/dst.git`;
  await git(["init", "-q", "--bare", gitDir]);
  const [made] = await makePackFixtures(`${dir}/packs`, { count: 1, bytesEach: size, seed: 7 });
  return { gitDir, hash: made.hash, bytes: await Deno.readFile(made.path) };
}

async function packDir(gitDir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(`${gitDir}/objects/pack`)) names.push(entry.name);
  return names.sort();
}

/** Writes `bytes` in pieces of awkward sizes: 1 byte, a prime, across the header and trailer. */
async function writeAwkwardly(spool: { write(b: Uint8Array): Promise<void> }, bytes: Uint8Array) {
  const cuts = [1, 11, 12, 13, 4093, bytes.byteLength - 21, bytes.byteLength - 1];
  let at = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < bytes.byteLength), bytes.byteLength]) {
    if (cut <= at) continue;
    await spool.write(bytes.subarray(at, cut));
    at = cut;
  }
}

Deno.test("a spooled pack is indexed from its file and installed under its checksum", async () => {
  await using dir = await tempDir();
  const { gitDir, hash, bytes } = await setUp(dir.path, 96 * 1024);
  const spool = await PackSpool.open({ gitDir });
  await writeAwkwardly(spool, bytes);
  assertEquals(spool.bytes, bytes.byteLength);
  assertEquals(await spool.finish(), hash);
  const packPath = await spool.install();
  assertEquals(packPath, `${gitDir}/objects/pack/pack-${hash}.pack`);
  assertEquals(await packDir(gitDir), [`pack-${hash}.idx`, `pack-${hash}.pack`]);
  assertEquals(await Deno.readFile(packPath), bytes, "the pack is the bytes written, unchanged");
  await git(["verify-pack", packPath.replace(/\.pack$/, ".idx")]);
});

Deno.test("a spooled pack that is corrupt or cut short is index-pack's error, nothing staged", async (t) => {
  await using dir = await tempDir();
  const { gitDir, bytes } = await setUp(dir.path, 64 * 1024);
  const flipped = bytes.slice();
  flipped[bytes.byteLength >> 1] ^= 0x40;
  for (
    const [name, input] of [
      ["a flipped byte", flipped],
      ["its trailer missing", bytes.subarray(0, bytes.byteLength - 20)],
      ["not a pack", new TextEncoder().encode("hello")],
    ] as const
  ) {
    await t.step(name, async () => {
      const spool = await PackSpool.open({ gitDir });
      await spool.write(input);
      const error = await assertRejects(() => spool.finish(), IndexPackError);
      assert(error.stderr.length > 0, "index-pack's own words are kept");
      assertEquals(await packDir(gitDir), []);
    });
  }
});

Deno.test("a spool handed to a streaming index-pack part way gives the same pack and leaves no file", async () => {
  await using dir = await tempDir();
  const { gitDir, hash, bytes } = await setUp(dir.path, 600 * 1024);
  const spool = await PackSpool.open({ gitDir });
  // More than one replay chunk (256 KiB) already spooled, cut inside an object.
  const cut = 300 * 1024 + 7;
  await spool.write(bytes.subarray(0, cut));
  const indexer = await spool.toStream();
  assertEquals((await packDir(gitDir)).filter((n) => n.startsWith("tmp_gitedge_")).length, 1);
  await indexer.write(bytes.subarray(cut));
  assertEquals(await indexer.finish(), hash);
  await indexer.install();
  assertEquals(await packDir(gitDir), [`pack-${hash}.idx`, `pack-${hash}.pack`]);
  await spool.discard(); // a handed-over spool owns nothing any more
  assertEquals(await packDir(gitDir), [`pack-${hash}.idx`, `pack-${hash}.pack`]);
});

/** Whether a `git index-pack` for `gitDir` is running. */
async function indexPackRunning(gitDir: string): Promise<boolean> {
  const out = await new Deno.Command("ps", { args: ["-eo", "args"], stdout: "piped" }).output();
  return new TextDecoder().decode(out.stdout).split("\n").some((line) =>
    line.includes("index-pack") && line.includes(gitDir)
  );
}

Deno.test("aborting a spool before or while index-pack runs stops it and removes the spool", async (t) => {
  await using dir = await tempDir();
  const { gitDir, bytes } = await setUp(dir.path, 24 * 1024 * 1024);
  for (const when of ["before index-pack starts", "while index-pack runs"]) {
    await t.step(when, async () => {
      const stop = new AbortController();
      const spool = await PackSpool.open({ gitDir, signal: stop.signal, fsync: false });
      await spool.write(bytes);
      const finishing = spool.finish();
      finishing.catch(() => {}); // asserted below
      if (when === "while index-pack runs") {
        const deadline = Date.now() + 10_000;
        while (!(await indexPackRunning(gitDir))) {
          assert(Date.now() < deadline, "index-pack never started");
        }
      }
      stop.abort(new Error("stopped"));
      const error = await assertRejects(() => finishing, Error);
      assertEquals(error.message, "stopped");
      assertEquals(await packDir(gitDir), []);
      assertEquals(await indexPackRunning(gitDir), false, "index-pack is gone");
      await spool.discard();
    });
  }
});

Deno.test("a discarded spool removes its file, and a discarded spool cannot be written", async () => {
  await using dir = await tempDir();
  const { gitDir, bytes } = await setUp(dir.path, 16 * 1024);
  const spool = await PackSpool.open({ gitDir });
  await spool.write(bytes.subarray(0, 1000));
  assertEquals((await packDir(gitDir)).length, 1);
  await spool.discard();
  await spool.discard();
  assertEquals(await packDir(gitDir), []);
  await assertRejects(() => spool.write(bytes), Error, "PackSpool is discarded");
});

Deno.test("a body the spool pipes itself lands whole; cut part way, the spool resumes from its file's size", async () => {
  await using dir = await tempDir();
  const { gitDir, hash, bytes } = await setUp(dir.path, 512 * 1024);
  const cutAt = 300_000;
  let requests = 0;
  // Serves the pack from a `Range` offset; the first response breaks off after `cutAt` bytes.
  await using server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const from = Number(/^bytes=(\d+)-$/.exec(req.headers.get("range") ?? "")?.[1] ?? 0);
    const first = requests++ === 0;
    const rest = bytes.subarray(from);
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        if (!first) return c.enqueue(rest), c.close();
        for (let at = 0; at < cutAt - from; at += 65536) {
          c.enqueue(rest.subarray(at, Math.min(at + 65536, cutAt - from)));
        }
        setTimeout(() => c.error(new Error("cut")), 50);
      },
    });
    return new Response(body, { headers: { "content-length": String(rest.byteLength) } });
  });
  const url = `http://127.0.0.1:${server.addr.port}/pack`;
  const spool = await PackSpool.open({ gitDir });
  await spool.write(bytes.subarray(0, 13)); // the first bytes through write(), as "auto" does
  const seen: number[] = [];
  const first = await fetch(url, { headers: { range: "bytes=13-" } });
  await assertRejects(() => spool.pipeFrom(first.body!, (n) => seen.push(n)));
  // What reached the file is a prefix of the body, and the spool knows its size.
  assert(spool.resumable, "still resumable");
  assert(spool.bytes > 13 && spool.bytes <= cutAt, `spooled ${spool.bytes}`);
  assertEquals(seen.at(-1), spool.bytes);
  assert(seen.every((n, i) => i === 0 || n > seen[i - 1]), "sizes only grow");
  const resumed = await fetch(url, { headers: { range: `bytes=${spool.bytes}-` } });
  await spool.pipeFrom(resumed.body!, (n) => seen.push(n));
  assertEquals(spool.bytes, bytes.byteLength);
  assertEquals(seen.at(-1), bytes.byteLength);
  assertEquals(await spool.finish(), hash);
  const packPath = await spool.install();
  assertEquals(await Deno.readFile(packPath), bytes, "the pack is the body, unchanged");
});
