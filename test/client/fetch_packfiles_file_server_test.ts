/** fetchPackfiles against the shared test file server (`test/support/relay.ts`) and its faults. */
import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { fetchPackfiles } from "../../src/client/fetch_packfiles.ts";
import { PackfileDownloadError } from "../../src/client/errors.ts";
import { git, tempDir } from "../support/git.ts";
import { makePackFixtures } from "../support/pack_fixtures.ts";
import { type Fault, startFileServer } from "../support/relay.ts";

const KiB = 1024;

Deno.test("every fault kind of the file server is retried and the packs land", async () => {
  await using dir = await tempDir();
  const packs = await makePackFixtures(`${dir.path}/packs`, { count: 7, bytesEach: 96 * KiB });
  const faults: Fault[] = [
    { kind: "status", status: 503, times: 2 },
    { kind: "status", status: 404, times: 1 },
    { kind: "truncate", afterBytes: 40 * KiB, times: 1 },
    { kind: "corrupt", atByte: 50 * KiB, times: 1 },
    // A stall only the client's idle timeout ends (the server's sleep is aborted on cancel).
    { kind: "stall", afterBytes: 30 * KiB, ms: 3_600_000, times: 1 },
    { kind: "truncate", afterBytes: 20 * KiB, times: 1 },
    { kind: "truncate", afterBytes: 20 * KiB, times: 1 },
  ];
  // The last two resume into a server that ignores the range, or answers 416.
  const plan: Record<string, Fault[]> = {};
  packs.forEach((p, i) => (plan[`/${p.hash}.pack`] = [faults[i]]));
  plan[`/${packs[5].hash}.pack`].push({ kind: "ignore-range", times: 1 });
  plan[`/${packs[6].hash}.pack`].push({ kind: "bad-416", times: 1 });
  await using server = await startFileServer({
    files: Object.fromEntries(packs.map((p) => [`/${p.hash}.pack`, p.path])),
    faults: plan,
  });
  const gitDir = `${dir.path}/dst.git`;
  await git(["init", "-q", "--bare", gitDir]);
  const results = await fetchPackfiles(
    packs.map((p) => ({ hash: p.hash, uri: `${server.url}/${p.hash}.pack` })),
    // Healthy transfers are never idle for 2 s, even on a loaded machine: retry counts are exact.
    { gitDir, jobs: 4, timeoutMs: 2_000, backoffMs: 5 },
  );
  // An ignored range restarts on the same 200 response; a 416 costs one more request.
  assertEquals(results.map((r) => r.retries), [2, 1, 1, 1, 1, 1, 2]);
  for (const [i, r] of results.entries()) {
    assertEquals(r.bytes, packs[i].size);
    await git(["verify-pack", r.packPath.replace(/\.pack$/, ".idx")]);
  }
  const objects = await git(["count-objects", "-v"], { cwd: gitDir });
  assert(/in-pack: \d+/.test(objects));
});

Deno.test("a fault that persists fails with the URI named and nothing left behind", async () => {
  await using dir = await tempDir();
  const [pack] = await makePackFixtures(`${dir.path}/packs`, { count: 1, bytesEach: 32 * KiB });
  await using server = await startFileServer({
    files: { "/p.pack": pack.path },
    faults: { "/p.pack": { kind: "status", status: 500, times: 100 } },
  });
  const gitDir = `${dir.path}/dst.git`;
  await git(["init", "-q", "--bare", gitDir]);
  const error = await assertRejects(
    () =>
      fetchPackfiles([{ hash: pack.hash, uri: `${server.url}/p.pack` }], {
        gitDir,
        retries: 3,
        backoffMs: 1,
      }),
    PackfileDownloadError,
  );
  assertEquals(error.attempts, 4);
  assert(error.message.includes(`${server.url}/p.pack`) && error.message.includes("500"));
  assertEquals(server.stats.requests, 4);
  assertEquals([...Deno.readDirSync(`${gitDir}/objects/pack`)], []);
});
