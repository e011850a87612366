/**
 * `gitedge clone --trust-edge-index` against the real Deno edge (`--pack-indexes on`) in front of
 * a `git http-backend` origin: the URI packs come with the edge's indexes and no index-pack runs
 * for them; an edge without indexes falls back to index-pack; a tampered index is refused with a
 * clear error and no directory left; a swap of two offsets that passes every checksum is the
 * documented limit, and `git fsck` finds it.
 */
import { createHash } from "node:crypto";
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../support/git.ts";
import { type Origin, startOrigin } from "../support/origin.ts";
import { assertSameClone, makeRepo } from "../support/fixtures.ts";
import { denoEdgeFactory, type EdgeUnderTest } from "../support/edge.ts";
import { warm } from "../proxy/edge_suite.ts";
import type { Manifest } from "../../src/proxy/deps.ts";
import { checkIndex } from "../../src/client/edge_index.ts";

const REPO = "team/r.git";
const SPEC = { commits: 16, branches: 2, tags: 2, binaryBytes: 400_000, deltaFileRevisions: 12 };
const CLI = new URL("../../edge/deno/cli.ts", import.meta.url).pathname;

interface Run {
  code: number;
  stderr: string;
  json: { packs: { hash: string; edgeIndex?: boolean }[] } | null;
  /** `git index-pack` processes the clone started (from GIT_TRACE2_EVENT). */
  indexPacks: number;
}

/** `gitedge clone --json ARGS` with git's trace2 events counted. */
async function cloneTraced(args: string[], cwd: string): Promise<Run> {
  const trace = `${cwd}/trace-${crypto.randomUUID()}.json`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", CLI, "clone", "--json", ...args],
    cwd,
    env: { ...GIT_ENV, GIT_TRACE2_EVENT: trace },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const events = (await Deno.readTextFile(trace).catch(() => "")).split("\n").filter(Boolean)
    .map((line) => JSON.parse(line));
  const indexPacks =
    events.filter((e) => e.event === "start" && e.argv?.includes("index-pack")).length;
  const stdout = new TextDecoder().decode(out.stdout);
  return {
    code: out.code,
    stderr: new TextDecoder().decode(out.stderr),
    json: out.code === 0 ? JSON.parse(stdout) : null,
    indexPacks,
  };
}

async function assertSameAsOrigin(origin: Origin, ours: string, theirs: string): Promise<void> {
  await git(["clone", "-q", "--bare", origin.repoUrl(REPO), theirs]);
  await assertSameClone(ours, theirs);
  await git(["fsck", "--full"], { cwd: ours });
}

async function storedManifest(edge: EdgeUnderTest): Promise<Manifest> {
  const [key] = (await edge.listStored("repos/")).filter((k) => k.endsWith("/manifest.json"));
  return JSON.parse(new TextDecoder().decode(await edge.readStored(key)));
}

/** `idx` with its own trailing checksum recomputed (a tamper that passes that check). */
function resealed(idx: Uint8Array): Uint8Array {
  const out = idx.slice();
  const own = createHash("sha1").update(out.subarray(0, out.length - 20)).digest();
  out.set(own, out.length - 20);
  return out;
}

/** The offset table's position of object `i` in a SHA-1 v2 index of `n` objects. */
function offsetAt(n: number, i: number): number {
  return 8 + 1024 + n * 24 + 4 * i;
}

Deno.test({
  name: "gitedge clone --trust-edge-index: the edge's indexes instead of index-pack, same clone",
  fn: async (t) => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 3, packIndexes: true });
    await using plainEdge = await denoEdgeFactory({ origin: origin.url, chunks: 3 });
    await makeRepo(origin, REPO, SPEC);
    await warm(edge, REPO);
    await warm(plainEdge, REPO);
    const d = dir.path;

    await t.step("with indexes: no index-pack for the URI packs, same clone", async () => {
      const usual = await cloneTraced(["--bare", `${edge.url}/${REPO}`, `${d}/usual`], d);
      assertEquals(usual.code, 0, usual.stderr);
      const trusted = await cloneTraced(
        ["--bare", "--trust-edge-index", `${edge.url}/${REPO}`, `${d}/trusted`],
        d,
      );
      assertEquals(trusted.code, 0, trusted.stderr);
      assertEquals(trusted.json!.packs.length, 3, "three URI packs");
      assert(trusted.json!.packs.every((p) => p.edgeIndex === true), "each with the edge's index");
      assert(usual.json!.packs.every((p) => p.edgeIndex === undefined), "not without the flag");
      assertEquals(trusted.indexPacks, usual.indexPacks - 3, "three fewer index-pack runs");
      await assertSameAsOrigin(origin, `${d}/trusted`, `${d}/trusted-git`);
      // The installed index is the edge's, byte for byte.
      for (const pack of (await storedManifest(edge)).layers.flat()) {
        assertEquals(
          await Deno.readFile(`${d}/trusted/objects/pack/pack-${pack.hash}.idx`),
          await edge.readStored(pack.index!.key),
        );
      }
    });

    await t.step("an edge without indexes: index-pack as usual, same clone", async () => {
      const run = await cloneTraced(
        ["--bare", "--trust-edge-index", `${plainEdge.url}/${REPO}`, `${d}/plain`],
        d,
      );
      assertEquals(run.code, 0, run.stderr);
      assert(run.json!.packs.every((p) => p.edgeIndex === undefined), "no edge index");
      assertEquals(run.json!.packs.length, 3);
      await assertSameAsOrigin(origin, `${d}/plain`, `${d}/plain-git`);
    });

    const pack = (await storedManifest(edge)).layers.flat()[0];
    const original = await edge.readStored(pack.index!.key);
    const n = pack.objects;
    const tampered = async (name: string, idx: Uint8Array, message: RegExp) => {
      await t.step(`a tampered index (${name}) is refused, nothing left`, async () => {
        await edge.writeStored(pack.index!.key, idx);
        const target = `${d}/tampered-${name.replaceAll(" ", "-")}`;
        const run = await cloneTraced(["--trust-edge-index", `${edge.url}/${REPO}`, target], d);
        await edge.writeStored(pack.index!.key, original);
        assertEquals(run.code, 4, run.stderr);
        assertMatch(
          run.stderr,
          /the pack index the edge sent for http:\/\/127\.0\.0\.1:\d+\/_edge\/packs\/[0-9a-f]+\/[^ ]+\.pack\?exp=\d+&sig=\S+ was refused: /,
        );
        assertMatch(run.stderr, message);
        assertEquals(await Deno.stat(target).catch(() => null), null, "no directory left");
      });
    };
    const wrongPackSum = original.slice();
    wrongPackSum[original.length - 40] ^= 1;
    await tampered(
      "wrong pack checksum",
      resealed(wrongPackSum),
      /pack checksum is not the pack's/,
    );
    const wrongOwnSum = original.slice();
    wrongOwnSum[original.length - 1] ^= 1;
    await tampered("wrong own checksum", wrongOwnSum, /own checksum does not match/);
    const outside = original.slice();
    new DataView(outside.buffer).setUint32(offsetAt(n, n - 1), pack.size);
    await tampered("offset out of range", resealed(outside), /offset \d+ is outside the pack/);

    await t.step("two blobs' offsets swapped pass every check; git fsck finds it", async () => {
      // Blobs are not read by the connectivity check, so the clone completes; their names then
      // lead to each other's contents, which `git fsck` recomputes.
      const blobsOf = async (idx: Uint8Array) => {
        const names = (await git(["show-index"], { stdin: idx })).trim().split("\n")
          .map((line) => line.split(" ")[1]);
        const types = await git(["cat-file", "--batch-check=%(objecttype)"], {
          cwd: `${origin.root}/${REPO}`,
          stdin: new TextEncoder().encode(names.join("\n") + "\n"),
        });
        return types.trim().split("\n").flatMap((type, i) => type === "blob" ? [i] : []);
      };
      let victim: { pack: typeof pack; idx: Uint8Array; blobs: number[] } | null = null;
      for (const p of (await storedManifest(edge)).layers.flat()) {
        const idx = await edge.readStored(p.index!.key);
        const blobs = await blobsOf(idx);
        if (blobs.length >= 2) victim = { pack: p, idx, blobs };
      }
      assert(victim, "a pack with two blobs");
      const [i, j] = victim.blobs;
      const m = victim.pack.objects;
      const swapped = victim.idx.slice();
      const view = new DataView(swapped.buffer);
      const a = view.getUint32(offsetAt(m, i));
      view.setUint32(offsetAt(m, i), view.getUint32(offsetAt(m, j)));
      view.setUint32(offsetAt(m, j), a);
      // Their CRCs too, so that only hashing the objects again can tell.
      const crc = (k: number) => 8 + 1024 + m * 20 + 4 * k;
      const c = view.getUint32(crc(i));
      view.setUint32(crc(i), view.getUint32(crc(j)));
      view.setUint32(crc(j), c);
      const lie = resealed(swapped);
      const size = victim.pack.size;
      assertEquals(
        checkIndex(lie, { objects: m, computed: victim.pack.hash, size, hashBytes: 20 }),
        null,
        "the checks cannot see it",
      );
      await edge.writeStored(victim.pack.index!.key, lie);
      const run = await cloneTraced(
        ["--bare", "--trust-edge-index", `${edge.url}/${REPO}`, `${d}/lied`],
        d,
      );
      await edge.writeStored(victim.pack.index!.key, victim.idx);
      assertEquals(run.code, 0, run.stderr);
      const fsck = await new Deno.Command("git", {
        args: ["fsck", "--full"],
        cwd: `${d}/lied`,
        env: GIT_ENV,
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert(!fsck.success, "git fsck fails");
      assertMatch(new TextDecoder().decode(fsck.stderr), /packed [0-9a-f]{40} from \S+ is corrupt/);
    });
  },
});
