/**
 * A full disk under the filesystem store (issue #35, cases 12 and 13), on a real small tmpfs: a
 * put that cannot write every byte fails and leaves nothing; a response-cache answer cut short by
 * the disk is neither stored, nor counted, nor served; readiness reports a store it cannot write.
 * Skips (with its reason) where mounting a tmpfs is refused.
 */
import { FsPackStore, type WritableFile, writeVerified } from "../../../edge/deno/fs_store.ts";
import { StoreError } from "../../../src/storage/store.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { assert, assertEquals, assertRejects } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { skipped } from "../../support/skips.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";

/** A tmpfs of `size` bytes, unmounted on dispose; null (logged) where mounting is refused. */
async function smallTmpfs(size: number): Promise<(AsyncDisposable & { path: string }) | null> {
  const path = await Deno.makeTempDir({ prefix: "gitedge-tmpfs-" });
  const mount = await new Deno.Command("mount", {
    args: ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", path],
    stdout: "null",
    stderr: "piped",
  }).output().catch((err) => ({ success: false, stderr: new TextEncoder().encode(String(err)) }));
  if (!mount.success) {
    skipped(
      "full disk (tmpfs)",
      `cannot mount a tmpfs: ${new TextDecoder().decode(mount.stderr).trim()}`,
    );
    await Deno.remove(path).catch(() => {});
    return null;
  }
  return {
    path,
    async [Symbol.asyncDispose]() {
      await new Deno.Command("umount", { args: [path] }).output();
      await Deno.remove(path, { recursive: true }).catch(() => {});
    },
  };
}

/** Fills the file system of `dir` until about `leave` bytes are free (a file of zeros). */
async function fillLeaving(dir: string, leave: number): Promise<string> {
  const filler = `${dir}/filler`;
  const file = await Deno.open(filler, { write: true, create: true });
  const block = new Uint8Array(4096);
  try {
    for (;;) {
      const free = await freeBytes(dir);
      if (free <= leave) break;
      await file.write(block.subarray(0, Math.min(block.length, free - leave)));
    }
  } finally {
    file.close();
  }
  return filler;
}

async function freeBytes(dir: string): Promise<number> {
  const out = await new Deno.Command("df", { args: ["-B1", "--output=avail", dir] }).output();
  return Number(new TextDecoder().decode(out.stdout).trim().split("\n")[1]);
}

function chunks(count: number, size: number): ReadableStream<Uint8Array> {
  return ReadableStream.from(Array.from({ length: count }, (_, i) => new Uint8Array(size).fill(i)));
}

Deno.test("fs store on a full tmpfs: a put that cannot write every byte fails and leaves nothing", async () => {
  // Fails on a store that pipes into `Deno.open(...).writable`: with Deno 2.9.6 the put resolves
  // with 40,960 bytes counted and fewer on disk.
  await using fs = await smallTmpfs(256 * 1024);
  if (!fs) return;
  const store = new FsPackStore(`${fs.path}/store`);
  await store.put("r/first", chunks(1, 10));
  await fillLeaving(fs.path, 16 * 1024);
  await assertRejects(() => store.put("r/cache/x.resp", chunks(10, 4096)));
  assertEquals(await store.head("r/cache/x.resp"), null, "no object");
  assertEquals(await store.sweepIncomplete("r/", Date.now() + 1000), 0, "no temporary left");
  assertEquals((await store.list("r/")).map((o) => o.key), ["r/first"]);
});

Deno.test("response cache on a full disk: an answer cut short is not stored, counted or served", async () => {
  // Fails before fs_store.ts checked its writes: the answer was stored cut short and counted, and
  // the next clone in that state failed with `bad pack header`, also once space was freed.
  await using fs = await smallTmpfs(1024 * 1024);
  if (!fs) return;
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 4, branches: 0, tags: 0, binaryBytes: 24 * 1024 });
  const store = `${fs.path}/store`;
  await Deno.mkdir(store);
  const edge = await startDenoEdge({
    store,
    port: 0,
    config: { origin: origin.url, responseCacheBytes: 64 << 20 },
    onBuildError: () => {},
  });
  try {
    const filler = await fillLeaving(fs.path, 8 * 1024);
    const clone = (to: string) =>
      git(["clone", "-q", "--depth", "1", "--no-local", `${edge.url}/r.git`, `${dir.path}/${to}`]);
    await clone("a");
    await edge.idle();
    const metrics = await (await fetch(`${edge.url}/_edge/metrics`)).text();
    const stored = metrics.split("\n").find((l) =>
      l.startsWith("gitedge_response_cache_stored_bytes_total")
    );
    assert(stored === undefined || stored.endsWith(" 0"), `nothing counted as stored: ${stored}`);
    const entries = await new FsPackStore(store).list("cache/");
    assertEquals(entries, [], "nothing stored");
    // With space again, the same request is answered whole (from the origin or a complete entry).
    await Deno.remove(filler);
    await clone("b");
    await clone("c");
    await git(["-C", `${dir.path}/c`, "fsck", "--full"]);
    await git(["clone", "-q", "--depth", "1", `${origin.url}/r.git`, `${dir.path}/direct`]);
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/c`);
  } finally {
    await edge.stop();
  }
});

Deno.test("readiness on a full disk: the store is not writable until space is freed", async () => {
  // Fails with a probe of a few bytes (a 13-byte write fits where no fetch answer does), and with
  // the store that counted bytes it never wrote.
  await using fs = await smallTmpfs(512 * 1024);
  if (!fs) return;
  const store = `${fs.path}/store`;
  await Deno.mkdir(store);
  let now = Date.now();
  const edge = await startDenoEdge({
    store,
    port: 0,
    clock: { now: () => now },
    config: { origin: "http://127.0.0.1:9" },
  });
  const ready = async () => {
    const res = await fetch(`${edge.url}/_edge/health/ready`);
    return { status: res.status, store: (await res.json()).checks.store };
  };
  try {
    assertEquals(await ready(), { status: 200, store: "ok" });
    const filler = await fillLeaving(fs.path, 16 * 1024);
    now += 60_000; // past the last probe's outcome
    assertEquals(await ready(), { status: 503, store: "not writable" });
    await Deno.remove(filler);
    now += 60_000;
    assertEquals(await ready(), { status: 200, store: "ok" });
  } finally {
    await edge.stop();
  }
});

/** A file that writes at most `room` bytes in all, and whose size on disk is `onDisk(written)`. */
function faultyFile(room: number, onDisk = (n: number) => n): WritableFile & { written: number } {
  const file = {
    written: 0,
    write: (bytes: Uint8Array) => {
      const n = Math.min(bytes.byteLength, room - file.written);
      file.written += n;
      return Promise.resolve(n);
    },
    syncData: () => Promise.resolve(),
    stat: () => Promise.resolve({ size: onDisk(file.written) }),
  };
  return file;
}

Deno.test("verified writes: a write that stops short, or a file shorter than written, is an error", async () => {
  // Deterministic faults where a tmpfs cannot show them: each check alone catches its own.
  assertEquals(await writeVerified(faultyFile(1 << 20), chunks(3, 1000), "k"), 3000);
  const partial = faultyFile(2500);
  await assertRejects(
    () => writeVerified(partial, chunks(3, 1000), "k"),
    StoreError,
    "at byte 2500",
  );
  await assertRejects(
    () => writeVerified(faultyFile(1 << 20, (n) => n - 1), chunks(3, 1000), "k"),
    StoreError,
    "2999 of 3000 bytes on disk",
  );
});
