/**
 * Git LFS through the edge, end to end: stock git with Debian's git-lfs against an LFS origin the
 * harness runs (`test/support/lfs_origin.ts`), through an edge from any `EdgeFactory`. The origin's
 * object bytes are counted, never guessed; checked-out files are compared with what was pushed.
 */
import { assert, assertEquals } from "../support/assert.ts";
import type { EdgeFactory, EdgeUnderTest } from "../support/edge.ts";
import { GitCommandError, tempDir } from "../support/git.ts";
import {
  lfsGit,
  type LfsOrigin,
  makeLfsRepo,
  startLfsOrigin,
  withUser,
} from "../support/lfs_origin.ts";
import { SeededRandom } from "../support/random.ts";
import { lfsObjectKey } from "../../src/proxy/lfs/lfs_urls.ts";

export type LfsCase =
  | "clone"
  | "pull-fetch-all"
  | "push-locks"
  | "private"
  | "deleted"
  | "truncated"
  | "corrupt"
  | "shared"
  | "bad-input";

const USERS = { alice: "alice-pw", bob: "bob-pw" };
const ALICE = "alice:alice-pw";

function files(seed: number, sizes: Record<string, number>): Record<string, Uint8Array> {
  const rnd = new SeededRandom(seed);
  return Object.fromEntries(Object.entries(sizes).map(([p, n]) => [p, rnd.bytes(n)]));
}

/** Asserts that the checkout `dir` holds each of `want`'s files with their bytes. */
async function assertCheckedOut(dir: string, want: Record<string, Uint8Array>): Promise<void> {
  for (const [path, bytes] of Object.entries(want)) {
    const got = await Deno.readFile(`${dir}/${path}`);
    assertEquals(got.byteLength, bytes.byteLength, `${path}: size`);
    assert(got.every((b, i) => b === bytes[i]), `${path}: content differs`);
  }
}

async function cloneFails(args: string[], env: Record<string, string> = {}): Promise<string> {
  try {
    await lfsGit(args, undefined, env);
  } catch (e) {
    if (e instanceof GitCommandError) return e.stderr;
    throw e;
  }
  throw new Error(`expected git ${args.join(" ")} to fail`);
}

interface World {
  origin: LfsOrigin;
  edge: EdgeUnderTest;
  dir: string;
}

async function withWorld(
  factory: EdgeFactory,
  opts: { privateRepos?: Record<string, string[]> },
  body: (w: World) => Promise<void>,
): Promise<void> {
  await using origin = await startLfsOrigin({ users: USERS, privateRepos: opts.privateRepos });
  await using edge = await factory({ origin: origin.url });
  await using dir = await tempDir("gitedge-lfs-");
  await body({ origin, edge, dir: dir.path });
}

export function lfsSuite(
  factory: EdgeFactory,
  runtime: string,
  cases: readonly LfsCase[],
  testOpts: Partial<Deno.TestDefinition> = {},
): void {
  const test = (name: LfsCase, title: string, fn: () => Promise<void>) => {
    if (!cases.includes(name)) return;
    Deno.test({ ...testOpts, name: `[${runtime}] lfs: ${title}`, fn });
  };

  test(
    "clone",
    "a clone through the edge checks out what a direct clone does; the second costs the LFS origin no object bytes",
    async () => {
      await withWorld(factory, {}, async ({ origin, edge, dir }) => {
        const want = files(1, { "a.bin": 40_000, "sub/b.bin": 25_000, "c.bin": 3 });
        const oids = await makeLfsRepo(origin, "lfsrepo.git", want, ALICE);
        origin.resetStats();
        await lfsGit(["clone", "-q", `${origin.url}/lfsrepo.git`, `${dir}/direct`]);
        const direct = origin.stats.objectBytes;
        assertEquals(direct, 40_003 + 25_000);
        await assertCheckedOut(`${dir}/direct`, want);

        origin.resetStats();
        await lfsGit(["clone", "-q", `${edge.url}/lfsrepo.git`, `${dir}/first`]);
        await assertCheckedOut(`${dir}/first`, want);
        assertEquals(origin.stats.objectBytes, direct, "the first clone fetches each object once");
        const stored = await edge.listStored("lfs/objects/");
        assertEquals(stored, Object.values(oids).map(lfsObjectKey).sort());

        origin.resetStats();
        await lfsGit(["clone", "-q", `${edge.url}/lfsrepo.git`, `${dir}/second`]);
        await assertCheckedOut(`${dir}/second`, want);
        assertEquals(origin.stats.objectBytes, 0, "the second clone is served from the edge");
        assertEquals(origin.stats.objectGets, 0);
        // The batch request still reaches the origin: it decides who gets which object.
        assertEquals(origin.stats.batches, 1);
      });
    },
  );

  test("pull-fetch-all", "git lfs pull and git lfs fetch --all through the edge", async () => {
    await withWorld(factory, {}, async ({ origin, edge, dir }) => {
      const v1 = files(2, { "m.bin": 20_000, "n.bin": 10_000 });
      const oids1 = await makeLfsRepo(origin, "hist.git", v1, ALICE);
      // A second commit replaces m.bin: its old version lives in history only.
      await lfsGit(["clone", "-q", withUser(`${origin.url}/hist.git`, ALICE), `${dir}/w`]);
      await lfsGit(["lfs", "install", "--local"], `${dir}/w`);
      const v2 = files(3, { "m.bin": 15_000 });
      await Deno.writeFile(`${dir}/w/m.bin`, v2["m.bin"]);
      await lfsGit(["commit", "-q", "-am", "m v2"], `${dir}/w`);
      await lfsGit(["push", "-q", "origin", "main"], `${dir}/w`);

      origin.resetStats();
      const skip = { GIT_LFS_SKIP_SMUDGE: "1" };
      await lfsGit(["clone", "-q", `${edge.url}/hist.git`, `${dir}/c`], undefined, skip);
      assertEquals(origin.stats.objectBytes, 0, "nothing fetched while smudge is skipped");
      await lfsGit(["lfs", "pull"], `${dir}/c`);
      await assertCheckedOut(`${dir}/c`, { "m.bin": v2["m.bin"], "n.bin": v1["n.bin"] });
      assertEquals(origin.stats.objectBytes, 15_000 + 10_000);
      await lfsGit(["lfs", "fetch", "--all"], `${dir}/c`);
      const old = oids1["m.bin"];
      const local = `${dir}/c/.git/lfs/objects/${old.slice(0, 2)}/${old.slice(2, 4)}/${old}`;
      assertEquals((await Deno.readFile(local)).byteLength, 20_000);
      assertEquals(origin.stats.objectBytes, 15_000 + 10_000 + 20_000);

      // The same in a fresh clone: everything from the edge.
      origin.resetStats();
      await lfsGit(["clone", "-q", `${edge.url}/hist.git`, `${dir}/d`], undefined, skip);
      await lfsGit(["lfs", "fetch", "--all"], `${dir}/d`);
      await lfsGit(["lfs", "pull"], `${dir}/d`);
      await assertCheckedOut(`${dir}/d`, { "m.bin": v2["m.bin"], "n.bin": v1["n.bin"] });
      assertEquals(origin.stats.objectBytes, 0);
    });
  });

  test(
    "push-locks",
    "a push and locks through the edge reach the origin, never cached",
    async () => {
      await withWorld(factory, {}, async ({ origin, edge, dir }) => {
        await makeLfsRepo(origin, "push.git", files(4, { "a.bin": 5_000 }), ALICE);
        const remote = withUser(`${edge.url}/push.git`, ALICE);
        await lfsGit(["clone", "-q", remote, `${dir}/w`]);
        await lfsGit(["lfs", "install", "--local"], `${dir}/w`);
        const added = files(5, { "new.bin": 12_345 });
        await Deno.writeFile(`${dir}/w/new.bin`, added["new.bin"]);
        await lfsGit(["add", "new.bin"], `${dir}/w`);
        await lfsGit(["commit", "-q", "-m", "new"], `${dir}/w`);
        const storedBefore = await edge.listStored("lfs/objects/");
        origin.resetStats();
        await lfsGit(["push", "-q", "origin", "main"], `${dir}/w`);
        assertEquals(origin.stats.uploads, 1);
        assertEquals(origin.stats.uploadBytes, 12_345);
        const oid = (await lfsGit(["lfs", "ls-files", "-l"], `${dir}/w`)).split("\n")
          .find((l) => l.endsWith("new.bin"))!.split(" ")[0];
        assert(await origin.hasObject("push.git", oid), "the pushed object reached the origin");
        assertEquals(await edge.listStored("lfs/objects/"), storedBefore, "uploads are not cached");

        const locksBefore = origin.stats.lockCalls;
        await lfsGit(["lfs", "lock", "a.bin"], `${dir}/w`);
        const listed = await lfsGit(["lfs", "locks"], `${dir}/w`);
        assert(/a\.bin\s+alice/.test(listed), listed);
        await lfsGit(["lfs", "unlock", "a.bin"], `${dir}/w`);
        assertEquals(await lfsGit(["lfs", "locks"], `${dir}/w`), "");
        assert(origin.stats.lockCalls >= locksBefore + 4, `lock calls ${origin.stats.lockCalls}`);

        // A fresh clone through the edge checks out the pushed object.
        await lfsGit(["clone", "-q", `${edge.url}/push.git`, `${dir}/c`]);
        await assertCheckedOut(`${dir}/c`, added);
      });
    },
  );

  test("private", "a private repository's objects reach no caller the origin refuses", async () => {
    await withWorld(
      factory,
      { privateRepos: { "p.git": ["alice"] } },
      async ({ origin, edge, dir }) => {
        const want = files(6, { "secret.bin": 30_000 });
        const oids = await makeLfsRepo(origin, "p.git", want, ALICE);
        origin.resetStats();
        // Anonymous, a wrong password, another user: no object, no bytes from the origin.
        await cloneFails(["clone", "-q", `${edge.url}/p.git`, `${dir}/anon`]);
        await cloneFails([
          "clone",
          "-q",
          withUser(`${edge.url}/p.git`, "alice:wrong"),
          `${dir}/wrong`,
        ]);
        await cloneFails([
          "clone",
          "-q",
          withUser(`${edge.url}/p.git`, "bob:bob-pw"),
          `${dir}/bob`,
        ]);
        assertEquals(origin.stats.objectBytes, 0);
        assertEquals(await edge.listStored("lfs/objects/"), []);

        // Alice clones (the edge fills); then the others still get nothing from the edge.
        await lfsGit(["clone", "-q", withUser(`${edge.url}/p.git`, ALICE), `${dir}/alice`]);
        await assertCheckedOut(`${dir}/alice`, want);
        assertEquals(await edge.listStored("lfs/objects/"), [lfsObjectKey(oids["secret.bin"])]);
        const batch = (auth?: string) =>
          fetch(`${edge.url}/p.git/info/lfs/objects/batch`, {
            method: "POST",
            headers: {
              "content-type": "application/vnd.git-lfs+json",
              accept: "application/vnd.git-lfs+json",
              ...(auth ? { authorization: `Basic ${btoa(auth)}` } : {}),
            },
            body: JSON.stringify({
              operation: "download",
              objects: [{ oid: oids["secret.bin"], size: 30_000 }],
            }),
          });
        for (
          const [who, auth, status] of [
            ["anonymous", undefined, 401],
            ["a wrong password", "alice:nope", 401],
            ["bob", "bob:bob-pw", 404],
          ] as const
        ) {
          const res = await batch(auth);
          const text = await res.text();
          assertEquals(res.status, status, `${who}: ${text}`);
          assert(!text.includes("/_edge/lfs/"), `${who} got an edge URL: ${text}`);
          if (status === 401) assert(res.headers.get("lfs-authenticate"), `${who}: challenge`);
        }
        await cloneFails(["clone", "-q", `${edge.url}/p.git`, `${dir}/anon2`]);
        await cloneFails([
          "clone",
          "-q",
          withUser(`${edge.url}/p.git`, "bob:bob-pw"),
          `${dir}/bob2`,
        ]);

        // Alice's URL carries her grant: its signature binds the caller, the object and its size.
        const granted = await (await batch(ALICE)).json();
        const href: string = granted.objects[0].actions.download.href;
        assertEquals(granted.objects[0].actions.download.header, {
          Authorization: `Basic ${btoa(ALICE)}`,
        });
        const forged = href.replace(/size=\d+/, "size=29999");
        assertEquals(
          (await fetch(forged).then(async (r) => (await r.body?.cancel(), r))).status,
          403,
        );
        const other = href.replace(/c=[^&]+/, "c=AAAAAAAAAAAAAAAAAAAAAA");
        assertEquals(
          (await fetch(other).then(async (r) => (await r.body?.cancel(), r))).status,
          403,
        );
        // The store holds no credential.
        for (const key of await edge.listStored("")) {
          const text = new TextDecoder().decode(await edge.readStored(key));
          assert(!text.includes("alice-pw") && !text.includes(btoa(ALICE)), `${key} holds it`);
        }
      },
    );
  });

  test(
    "deleted",
    "an object deleted at the origin after it was cached: the origin's batch answer decides",
    async () => {
      await withWorld(factory, {}, async ({ origin, edge, dir }) => {
        const want = files(7, { "gone.bin": 8_000, "kept.bin": 9_000 });
        const oids = await makeLfsRepo(origin, "del.git", want, ALICE);
        await lfsGit(["clone", "-q", `${edge.url}/del.git`, `${dir}/a`]);
        await origin.deleteObject("del.git", oids["gone.bin"]);
        origin.resetStats();
        const stderr = await cloneFails(["clone", "-q", `${edge.url}/del.git`, `${dir}/b`]);
        assert(/gone\.bin|not found|does not exist/i.test(stderr), stderr);
        assertEquals(origin.stats.objectBytes, 0);
      });
    },
  );

  test(
    "truncated",
    "a truncated origin download fails the client, stores nothing, and the next clone succeeds",
    async () => {
      await withWorld(factory, {}, async ({ origin, edge, dir }) => {
        const want = files(8, { "t.bin": 200_000 });
        const oids = await makeLfsRepo(origin, "trunc.git", want, ALICE);
        origin.truncate.add(oids["t.bin"]);
        await cloneFails([
          "-c",
          "lfs.transfer.maxretries=1",
          "clone",
          "-q",
          `${edge.url}/trunc.git`,
          `${dir}/a`,
        ]);
        assertEquals(
          await edge.listStored("lfs/objects/"),
          [],
          "nothing stored from a cut download",
        );
        origin.truncate.clear();
        await lfsGit(["clone", "-q", `${edge.url}/trunc.git`, `${dir}/b`]);
        await assertCheckedOut(`${dir}/b`, want);
        assertEquals(await edge.listStored("lfs/objects/"), [lfsObjectKey(oids["t.bin"])]);
      });
    },
  );

  test(
    "corrupt",
    "an origin download whose content is not its oid fails the client and stores nothing",
    async () => {
      await withWorld(factory, {}, async ({ origin, edge, dir }) => {
        const want = files(11, { "k.bin": 150_000 });
        const oids = await makeLfsRepo(origin, "corrupt.git", want, ALICE);
        origin.corrupt.add(oids["k.bin"]);
        await cloneFails([
          "-c",
          "lfs.transfer.maxretries=1",
          "clone",
          "-q",
          `${edge.url}/corrupt.git`,
          `${dir}/a`,
        ]);
        assertEquals(
          await edge.listStored("lfs/objects/"),
          [],
          "nothing stored from a bad download",
        );
        origin.corrupt.clear();
        await lfsGit(["clone", "-q", `${edge.url}/corrupt.git`, `${dir}/b`]);
        await assertCheckedOut(`${dir}/b`, want);
        assertEquals(await edge.listStored("lfs/objects/"), [lfsObjectKey(oids["k.bin"])]);
      });
    },
  );

  test(
    "shared",
    "two repositories sharing an object store it once and share no access",
    async () => {
      await withWorld(
        factory,
        { privateRepos: { "priv.git": ["alice"] } },
        async ({ origin, edge, dir }) => {
          const shared = files(9, { "shared.bin": 50_000 });
          const oids = await makeLfsRepo(origin, "one.git", shared, ALICE);
          await makeLfsRepo(origin, "two.git", { "copy.bin": shared["shared.bin"] }, ALICE);
          await makeLfsRepo(origin, "priv.git", { "s.bin": shared["shared.bin"] }, ALICE);
          origin.resetStats();
          await lfsGit(["clone", "-q", `${edge.url}/one.git`, `${dir}/one`]);
          await lfsGit(["clone", "-q", `${edge.url}/two.git`, `${dir}/two`]);
          await assertCheckedOut(`${dir}/two`, { "copy.bin": shared["shared.bin"] });
          assertEquals(origin.stats.objectBytes, 50_000, "fetched once for both repositories");
          assertEquals(await edge.listStored("lfs/objects/"), [lfsObjectKey(oids["shared.bin"])]);
          // The bytes are in the store, yet bob gets nothing of the private repository.
          await cloneFails([
            "clone",
            "-q",
            withUser(`${edge.url}/priv.git`, "bob:bob-pw"),
            `${dir}/bob`,
          ]);
        },
      );
    },
  );

  test(
    "bad-input",
    "bad batch requests and origin garbage get clear errors and store nothing",
    async () => {
      await withWorld(factory, {}, async ({ origin, edge }) => {
        const want = files(10, { "x.bin": 1_000 });
        const oids = await makeLfsRepo(origin, "bad.git", want, ALICE);
        const post = async (body: string | Uint8Array<ArrayBuffer>) => {
          const res = await fetch(`${edge.url}/bad.git/info/lfs/objects/batch`, {
            method: "POST",
            headers: { "content-type": "application/vnd.git-lfs+json" },
            body,
          });
          return { status: res.status, text: await res.text() };
        };
        const oid = oids["x.bin"];
        const cases: [string, string | Uint8Array<ArrayBuffer>, number][] = [
          ["malformed JSON", "{not json", 400],
          ["not an object", "[1,2]", 400],
          ["bad operation", JSON.stringify({ operation: "steal", objects: [] }), 422],
          [
            "short oid",
            JSON.stringify({ operation: "download", objects: [{ oid: "abc", size: 1 }] }),
            422,
          ],
          [
            "upper-case oid",
            JSON.stringify({
              operation: "download",
              objects: [{ oid: oid.toUpperCase(), size: 1 }],
            }),
            422,
          ],
          [
            "negative size",
            JSON.stringify({ operation: "download", objects: [{ oid, size: -1 }] }),
            422,
          ],
          ["over the bound", new Uint8Array((1 << 20) + 10).fill(32), 413],
        ];
        origin.resetStats();
        for (const [what, body, status] of cases) {
          const got = await post(body);
          assertEquals(got.status, status, `${what}: ${got.text}`);
          assert(JSON.parse(got.text).message, `${what}: an LFS error body`);
        }
        assertEquals(origin.stats.batches, 0, "refused before the origin");

        // The origin answering garbage: 502, no URL.
        origin.garbage.on = true;
        const garbage = await post(
          JSON.stringify({ operation: "download", objects: [{ oid, size: 1_000 }] }),
        );
        assertEquals(garbage.status, 502, garbage.text);
        origin.garbage.on = false;
        // The origin's answer giving another size than asked: 502.
        const wrongSize = await post(
          JSON.stringify({ operation: "download", objects: [{ oid, size: 999 }] }),
        );
        assertEquals(wrongSize.status, 200, "the origin refuses that object itself");
        assert(!wrongSize.text.includes("/_edge/lfs/"), wrongSize.text);
        // A URL that is not signed, or names no object.
        for (const path of [`/_edge/lfs/${"0".repeat(32)}/${oid}?size=1000`, `/_edge/lfs/x/y`]) {
          const res = await fetch(`${edge.url}${path}`);
          await res.body?.cancel();
          assert(res.status === 403 || res.status === 404, `${path}: ${res.status}`);
        }
        // Only the LFS API's own paths pass (no encoded dots or slashes to the origin).
        const escape = await fetch(`${edge.url}/bad.git/info/lfs/locks/%2e%2e%2f%2e%2e%2fx`);
        assertEquals(escape.status, 404);
        assert((await escape.text()).includes("not a Git LFS API path"));
        assertEquals(await edge.listStored("lfs/"), []);
      });
    },
  );
}
