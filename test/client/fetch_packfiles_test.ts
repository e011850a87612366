import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { fetchPackfiles } from "../../src/client/fetch_packfiles.ts";
import { PackfileDownloadError, VerificationError } from "../../src/client/errors.ts";
import type { ProgressEvent } from "../../src/client/progress.ts";
import { git, tempDir } from "../support/git.ts";
import { type Fault, initBare, makePack, startFaultServer } from "./fault_server.ts";

interface Fixture {
  files: Map<string, Uint8Array>;
  packs: { path: string; hash: string; size: number }[];
}

async function fixture(dir: string, count: number, size: number): Promise<Fixture> {
  const src = await initBare(`${dir}/src.git`);
  const files = new Map<string, Uint8Array>();
  const packs = [];
  for (let i = 0; i < count; i++) {
    const { bytes, hash } = await makePack(src, size, 1000 + i);
    const path = `/packs/${hash}.pack`;
    files.set(path, bytes);
    packs.push({ path, hash, size: bytes.length });
  }
  return { files, packs };
}

async function packDirEntries(gitDir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(`${gitDir}/objects/pack`)) names.push(entry.name);
  return names.sort();
}

// The stall fault never ends by itself, so only the idle timeout can end it; healthy transfers are
// never idle that long, even on a loaded machine, so retry counts stay exact.
const FAST = { timeoutMs: 2_000, backoffMs: 5 };

/** Fails if any process still mentions `gitDir` on its command line (e.g. an orphan index-pack). */
async function assertNoProcessesFor(gitDir: string): Promise<void> {
  const out = await new Deno.Command("ps", { args: ["-eo", "args"], stdout: "piped" }).output();
  const lines = new TextDecoder().decode(out.stdout).split("\n").filter((l) => l.includes(gitDir));
  assertEquals(lines, [], "no process left running for the repository");
}

Deno.test("fetchPackfiles installs valid packs in parallel within the jobs bound", async () => {
  await using dir = await tempDir();
  const fx = await fixture(dir.path, 6, 64 * 1024);
  await using server = startFaultServer(fx.files, { chunkSize: 8 * 1024, chunkDelayMs: 5 });
  const gitDir = await initBare(`${dir.path}/dst.git`);
  const events: ProgressEvent[] = [];
  const results = await fetchPackfiles(
    fx.packs.map((p) => ({ hash: p.hash, uri: server.url(p.path) })),
    { gitDir, jobs: 3, onProgress: (e) => events.push(e), ...FAST },
  );
  assertEquals(results.map((r) => r.hash), fx.packs.map((p) => p.hash));
  assertEquals(server.maxActive(), 3);
  for (const [i, result] of results.entries()) {
    assertEquals(result.bytes, fx.packs[i].size);
    assertEquals(result.retries, 0);
    assertEquals(result.packPath, `${gitDir}/objects/pack/pack-${result.hash}.pack`);
    await git(["verify-pack", result.packPath.replace(/\.pack$/, ".idx")]);
  }
  const expected = fx.packs.flatMap((p) => [`pack-${p.hash}.idx`, `pack-${p.hash}.pack`]).sort();
  assertEquals(await packDirEntries(gitDir), expected);
  assertEquals(events.filter((e) => e.type === "done").length, 6);
  assertEquals(events.filter((e) => e.type === "start").length, 6);
  const last = events.filter((e) => e.type === "progress" && e.hash === fx.packs[0].hash).at(-1);
  assertEquals(last?.bytes, fx.packs[0].size);
  assertEquals(last?.total, fx.packs[0].size);
});

Deno.test("fetchPackfiles with jobs 1 runs one download at a time", async () => {
  await using dir = await tempDir();
  const fx = await fixture(dir.path, 3, 32 * 1024);
  await using server = startFaultServer(fx.files, { chunkSize: 8 * 1024, chunkDelayMs: 2 });
  const gitDir = await initBare(`${dir.path}/dst.git`);
  await fetchPackfiles(fx.packs.map((p) => ({ hash: p.hash, uri: server.url(p.path) })), {
    gitDir,
    jobs: 1,
    ...FAST,
  });
  assertEquals(server.maxActive(), 1);
});

Deno.test("fetchPackfiles takes a pack hash in either case and rejects a bad hash or URI up front", async () => {
  await using dir = await tempDir();
  const fx = await fixture(dir.path, 1, 16 * 1024);
  await using server = startFaultServer(fx.files);
  const gitDir = await initBare(`${dir.path}/dst.git`);
  const [pack] = fx.packs;
  const [result] = await fetchPackfiles([{
    hash: pack.hash.toUpperCase(),
    uri: server.url(pack.path),
  }], {
    gitDir,
    ...FAST,
  });
  assertEquals(result.packPath, `${gitDir}/objects/pack/pack-${pack.hash}.pack`);
  for (
    const [hash, uri] of [
      [pack.hash.slice(1), server.url(pack.path)],
      [`${pack.hash}0`, server.url(pack.path)],
      ["g".repeat(40), server.url(pack.path)],
      [pack.hash, `file://${gitDir}/x.pack`],
    ]
  ) {
    await assertRejects(() => fetchPackfiles([{ hash, uri }], { gitDir, ...FAST }), TypeError);
  }
  assertEquals(server.requests.length, 1, "nothing was fetched for the rejected entries");
});

Deno.test("a pack whose checksum differs from the advertised hash is rejected and removed", async () => {
  await using dir = await tempDir();
  const fx = await fixture(dir.path, 2, 16 * 1024);
  await using server = startFaultServer(fx.files);
  const gitDir = await initBare(`${dir.path}/dst.git`);
  const error = await assertRejects(
    () =>
      fetchPackfiles([{ hash: fx.packs[1].hash, uri: server.url(fx.packs[0].path) }], {
        gitDir,
        ...FAST,
      }),
    VerificationError,
  );
  assert(error.message.includes(fx.packs[0].hash), error.message);
  assertEquals(server.requests.length, 1, "a checksum mismatch is not retried");
  assertEquals(await packDirEntries(gitDir), []);
});

const transientFaults: { name: string; faults: Fault[]; resumes: boolean }[] = [
  { name: "503", faults: [{ kind: "status", status: 503 }], resumes: false },
  { name: "404", faults: [{ kind: "status", status: 404 }], resumes: false },
  { name: "truncation", faults: [{ kind: "truncate" }], resumes: true },
  { name: "stall", faults: [{ kind: "stall" }], resumes: true },
  { name: "corruption", faults: [{ kind: "corrupt" }], resumes: false },
  {
    name: "ignored range",
    faults: [{ kind: "truncate" }, { kind: "ignore-range" }],
    resumes: true,
  },
  { name: "bad 416", faults: [{ kind: "truncate" }, { kind: "bad-416" }], resumes: true },
  { name: "wrong range", faults: [{ kind: "truncate" }, { kind: "wrong-range" }], resumes: true },
];

Deno.test("transient faults are retried and the pack still lands", async (t) => {
  await using dir = await tempDir();
  const fx = await fixture(dir.path, 1, 96 * 1024);
  const pack = fx.packs[0];
  for (const { name, faults, resumes } of transientFaults) {
    await t.step(name, async () => {
      await using server = startFaultServer(fx.files);
      server.inject(pack.path, ...faults);
      const gitDir = await initBare(`${dir.path}/${name.replace(/\W/g, "_")}.git`);
      const events: ProgressEvent[] = [];
      const [result] = await fetchPackfiles([{ hash: pack.hash, uri: server.url(pack.path) }], {
        gitDir,
        ...FAST,
        onProgress: (e) => events.push(e),
      });
      assertEquals(result.retries, server.requests.length - 1);
      assert(result.retries >= 1);
      assertEquals(result.bytes, pack.size);
      await git(["verify-pack", result.packPath.replace(/\.pack$/, ".idx")]);
      assertEquals(await packDirEntries(gitDir), [
        `pack-${pack.hash}.idx`,
        `pack-${pack.hash}.pack`,
      ]);
      const retry = events.find((e) => e.type === "retry");
      assert(retry?.type === "retry");
      assertEquals(retry.resume, resumes);
      if (resumes) {
        // The second request continues where the first stopped.
        assertEquals(server.requests[1].range, `bytes=${retry.bytes}-`);
        assert(retry.bytes > 0);
      }
    });
  }
});

Deno.test("persistent faults fail cleanly, naming the URI and the attempts", async () => {
  await using dir = await tempDir();
  const fx = await fixture(dir.path, 3, 32 * 1024);
  await using server = startFaultServer(fx.files, { chunkDelayMs: 2, chunkSize: 4096 });
  const bad = fx.packs[1];
  server.inject(bad.path, ...Array(10).fill({ kind: "corrupt" }));
  const gitDir = await initBare(`${dir.path}/dst.git`);
  const error = await assertRejects(
    () =>
      fetchPackfiles(fx.packs.map((p) => ({ hash: p.hash, uri: server.url(p.path) })), {
        gitDir,
        jobs: 1,
        retries: 2,
        ...FAST,
      }),
    PackfileDownloadError,
  );
  assertEquals(error.uri, server.url(bad.path));
  assertEquals(error.attempts, 3);
  assert(error.message.includes(server.url(bad.path)), error.message);
  assert(error.message.includes("index-pack"), error.message);
  // The first pack finished before the failure; the third never started; nothing half-written.
  assertEquals(await packDirEntries(gitDir), [
    `pack-${fx.packs[0].hash}.idx`,
    `pack-${fx.packs[0].hash}.pack`,
  ]);
  assertEquals(server.requests.filter((r) => r.path === fx.packs[2].path).length, 0);
  await assertNoProcessesFor(gitDir);
});

Deno.test("a 401 is not retried", async () => {
  await using dir = await tempDir();
  const fx = await fixture(dir.path, 1, 8 * 1024);
  await using server = startFaultServer(fx.files);
  server.inject(fx.packs[0].path, { kind: "status", status: 401 });
  const gitDir = await initBare(`${dir.path}/dst.git`);
  const error = await assertRejects(
    () =>
      fetchPackfiles([{ hash: fx.packs[0].hash, uri: server.url(fx.packs[0].path) }], {
        gitDir,
        headers: { authorization: "Bearer secret" },
        ...FAST,
      }),
    PackfileDownloadError,
  );
  assertEquals(error.attempts, 1);
  assertEquals(server.requests[0].authorization, "Bearer secret");
});

Deno.test("aborting stops every download and leaves nothing staged", async () => {
  await using dir = await tempDir();
  const fx = await fixture(dir.path, 2, 64 * 1024);
  await using server = startFaultServer(fx.files, { chunkSize: 1024, chunkDelayMs: 10 });
  const gitDir = await initBare(`${dir.path}/dst.git`);
  const controller = new AbortController();
  const reason = new Error("user gave up");
  const running = fetchPackfiles(fx.packs.map((p) => ({ hash: p.hash, uri: server.url(p.path) })), {
    gitDir,
    signal: controller.signal,
    onProgress: (e) => {
      if (e.type === "progress" && e.bytes > 8 * 1024) controller.abort(reason);
    },
    ...FAST,
  });
  const error = await assertRejects(() => running);
  assertEquals(error, reason);
  assertEquals(await packDirEntries(gitDir), []);
  await assertNoProcessesFor(gitDir);
});
