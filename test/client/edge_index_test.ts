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
import { tracedGit, URI_CLONE, urisFetched, warm } from "../proxy/edge_suite.ts";
import { serveLoopback } from "../support/http_server.ts";
import type { Manifest } from "../../src/proxy/core/manifest.ts";
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
    await t.step("an index whole in itself but of another object count than the pack's", () => {
      const of = (objects: number) =>
        checkIndex(original, { objects, computed: pack.hash, size: pack.size, hashBytes: 20 });
      assertEquals(of(n), null, "the edge's index passes");
      assertMatch(of(n + 1) ?? "", /it lists \d+ objects, the pack has \d+/);
    });

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

Deno.test({
  name:
    "gitedge clone --trust-edge-index: a pack with a wrong trailer, or another valid pack than the announced one, is refused",
  fn: async (t) => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await makeRepo(origin, REPO, SPEC);
    // A front that lies about packs: the edge's public URL, so the pack URIs lead through it.
    let edgeUrl = "";
    let lie: ((url: URL) => Promise<Response | null>) | null = null;
    const front = serveLoopback(async (req) => {
      const url = new URL(req.url);
      const told = lie ? await lie(url) : null;
      return told ?? await fetch(`${edgeUrl}${url.pathname}${url.search}`, {
        method: req.method,
        headers: req.headers,
        body: req.body,
      });
    });
    try {
      await using edge = await denoEdgeFactory({
        origin: origin.url,
        chunks: 3,
        packIndexes: true,
        publicUrl: front.url,
      });
      edgeUrl = edge.url;
      await warm(edge, REPO);
      const d = dir.path;
      // The URIs a clone is handed (each pack's signed URL, through the front).
      const trace = await tracedGit([...URI_CLONE, "--bare", `${front.url}/${REPO}`, `${d}/uris`]);
      const uris = urisFetched(trace);
      assertEquals(uris.length, 3, "three packs by URI");
      assert(uris.every((u) => u.uri.startsWith(front.url)), "through the front");
      const [a, b] = uris;
      const pathOf = (uri: string) => new URL(uri).pathname;
      const refused = async (name: string, message: RegExp) => {
        const target = `${d}/${name}`;
        const run = await cloneTraced(["--trust-edge-index", `${front.url}/${REPO}`, target], d);
        assertEquals(run.code, 4, run.stderr);
        assertMatch(run.stderr, message);
        assertEquals(await Deno.stat(target).catch(() => null), null, "no directory left");
      };

      await t.step("the pack's trailer is not its checksum (its content intact)", async () => {
        lie = async (url) => {
          if (url.pathname !== pathOf(a.uri)) return null;
          const res = await fetch(`${edgeUrl}${url.pathname}${url.search}`);
          const bytes = new Uint8Array(await res.arrayBuffer());
          bytes[bytes.length - 1] ^= 1;
          return new Response(bytes, { status: res.status, headers: res.headers });
        };
        await refused("trailer", new RegExp(`has hash [0-9a-f]{40}, expected ${a.hash}`));
      });

      await t.step(
        "another valid pack and its own index under the announced pack's URL",
        async () => {
          // B's pack and index are consistent with each other: only the announced hash tells.
          lie = async (url) => {
            const path = url.pathname;
            if (path === pathOf(a.uri)) return await fetch(b.uri.replace(front.url, edgeUrl));
            if (path === pathOf(a.uri).replace(/\.pack$/, ".idx")) {
              return await fetch(b.uri.replace(front.url, edgeUrl).replace(/\.pack\?/, ".idx?"));
            }
            return null;
          };
          await refused("swapped", new RegExp(`has hash ${b.hash}, expected ${a.hash}`));
        },
      );

      lie = null;
      await t.step("told the truth again: the clone works", async () => {
        const run = await cloneTraced(
          ["--bare", "--trust-edge-index", `${front.url}/${REPO}`, `${d}/honest`],
          d,
        );
        assertEquals(run.code, 0, run.stderr);
        assert(run.json!.packs.every((p) => p.edgeIndex === true), "the edge's indexes");
        await assertSameAsOrigin(origin, `${d}/honest`, `${d}/honest-git`);
      });
    } finally {
      await front.stop();
    }
  },
});
