/**
 * Edge suite part: Who may do what, and what is counted: private origins, multi-origin allow-lists, the admin token, metrics.
 * Registered per runtime by `edgeSuite` (edge_suite.ts).
 */
import { encodePkts } from "../../src/git/pktline.ts";
import { assertSameClone, makeRepo, refsOf } from "../support/fixtures.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { URI_CLONE, urisFetched } from "../support/traced_git.ts";
import { latin1, postUploadPack, status, type Suite, uriFetch, warm } from "./edge_world.ts";

export function accessCases({ t }: Suite): void {
  t(
    "a private origin: credentials pass through, URIs only after the origin authorised",
    async (w) => {
      await makeRepo(w.origin, "p.git", { commits: 12, binaryBytes: 300_000 });
      const anon = `${w.edge.url}/p.git`;
      const authed = anon.replace("http://", "http://alice:s3cret@");
      // Without credentials git sees the origin's 401 and fails (no prompt in tests).
      const denied = await w.git(["clone", "-q", anon, `${w.dir}/x`]).then(
        () => "",
        (e) => String(e),
      );
      assert(
        /Authentication failed|could not read Username|401/.test(denied),
        `401 reaches git: ${denied}`,
      );
      // An anonymous fetch asking for URIs is refused by the origin and starts no build.
      const tip = (await refsOf(`${w.origin.root}/p.git`))["refs/heads/main"];
      const refused = await postUploadPack(`${w.edge.url}/p.git`, uriFetch(tip));
      assertEquals(refused.status, 401, "anonymous fetch refused by the origin");
      await refused.body?.cancel();
      const basic = `Basic ${btoa("alice:s3cret")}`;
      const reader = { "x-origin-authorization": basic };
      assertEquals(
        (await status(w.edge, "p.git", reader)).builds,
        0,
        "no build for the unauthorised",
      );
      // The edge cannot build a snapshot without credentials, and stores none.
      const res = await fetch(`${w.edge.url}/_edge/warm/p.git`, { method: "POST" });
      assertEquals(res.status, 401, "warm without origin credentials is refused");
      await res.body?.cancel();
      // With credentials: a clone works, and schedules a build with them (in memory only).
      await w.git(["-c", "fetch.uriProtocols=http", "clone", "-q", authed, `${w.dir}/a`]);
      await w.git(["fsck", "--full"], { cwd: `${w.dir}/a` });
      const snap = await warm(w.edge, "p.git", reader);
      assertEquals(snap.state, "ready", "warm with origin credentials");
      const trace = await w.tracedGit([...URI_CLONE, authed, `${w.dir}/b`]);
      assertEquals(
        urisFetched(trace).length,
        (snap.packs as unknown[]).length,
        "URIs with credentials",
      );
      await assertSameClone(`${w.dir}/a`, `${w.dir}/b`);
      // The origin accepted alice moments ago (ls-refs): the edge answered her fetch itself.
      w.origin.stats.reset();
      await w.tracedGit([...URI_CLONE, authed, `${w.dir}/c`]);
      await assertSameClone(`${w.dir}/a`, `${w.dir}/c`);
      assertEquals(
        w.origin.stats.byPath["POST /p.git/git-upload-pack"]?.requests,
        1,
        `only ls-refs reached the origin: ${JSON.stringify(w.origin.stats.byPath)}`,
      );
      // Her shallow clones: the second is answered from the response cache.
      w.origin.stats.reset();
      await w.git([...URI_CLONE, "--depth", "1", authed, `${w.dir}/s1`]);
      await w.git([...URI_CLONE, "--depth", "1", authed, `${w.dir}/s2`]);
      await assertSameClone(`${w.dir}/s1`, `${w.dir}/s2`);
      assertEquals(w.origin.stats.commands.fetch, 1, "one shallow fetch reached the origin");
      // A cached shallow answer, with include-tag (an anonymous tag listing is refused) and
      // without (no memo): alice's second ask is a hit, so the entry is there; the same bytes
      // without credentials get the origin's 401, and no cached bytes.
      for (const extra of [["include-tag\n"], []]) {
        const body = encodePkts([
          "command=fetch\n",
          "object-format=sha1\n",
          "delim",
          "thin-pack\n",
          "ofs-delta\n",
          ...extra,
          `want ${(snap.tips as string[])[0]}\n`,
          "deepen 1",
          "done\n",
          "flush",
        ]) as Uint8Array<ArrayBuffer>;
        const ask = (authorization?: string) =>
          fetch(`${w.edge.url}/p.git/git-upload-pack`, {
            method: "POST",
            headers: {
              "git-protocol": "version=2",
              "content-type": "application/x-git-upload-pack-request",
              ...(authorization ? { authorization } : {}),
            },
            body,
          });
        const what = `shallow fetch (${extra.join("").trim() || "no include-tag"})`;
        const first = await ask(basic);
        assert((await first.text()).includes("PACK"), `alice: a pack (${what})`);
        w.origin.stats.reset();
        const again = await ask(basic);
        assert((await again.text()).includes("PACK"), `alice again: a pack (${what})`);
        assertEquals(w.origin.stats.commands.fetch ?? 0, 0, `alice again: a cache hit (${what})`);
        const res = await ask();
        assertEquals(res.status, 401, `anonymous ${what}`);
        assert(!(await res.text()).includes("PACK"), `no pack to the anonymous (${what})`);
        assertEquals(w.origin.stats.commands.fetch ?? 0, 0, `anonymous: no fetch (${what})`);
      }
      // Another credential is not vouched for by alice's: its fetch goes to the origin, refused.
      const wrong = await fetch(`${w.edge.url}/p.git/git-upload-pack`, {
        method: "POST",
        headers: {
          "git-protocol": "version=2",
          "content-type": "application/x-git-upload-pack-request",
          authorization: `Basic ${btoa("alice:wrong")}`,
        },
        body: uriFetch((snap.tips as string[])[0]) as Uint8Array<ArrayBuffer>,
      });
      assertEquals(wrong.status, 401, "a wrong password is refused by the origin");
      assert(!(await wrong.text()).includes("/_edge/packs/"), "no URIs to a wrong password");
      // A snapshot exists now, yet an anonymous fetch still gets the origin's 401 and no URIs.
      const tips = snap.tips as string[];
      const anonFetch = await postUploadPack(`${w.edge.url}/p.git`, uriFetch(tips[0]));
      assertEquals(anonFetch.status, 401, "anonymous fetch refused by the origin");
      assert(anonFetch.headers.get("www-authenticate")?.startsWith("Basic"), "challenge forwarded");
      assert(!(await anonFetch.text()).includes("/_edge/packs/"), "no URIs to the unauthorised");
      // A plain clone's fetch of every snapshot tip (what the edge streams from the snapshot):
      // anonymous or with a wrong password, the origin's 401 and no pack bytes; alice's, a pack.
      const plain = encodePkts([
        "command=fetch\n",
        "delim",
        "thin-pack\n",
        "ofs-delta\n",
        "no-progress\n",
        ...[...new Set(tips)].map((t) => `want ${t}\n`),
        "done\n",
        "flush",
      ]);
      for (const authorization of [undefined, `Basic ${btoa("alice:wrong")}`, basic]) {
        const res = await fetch(`${w.edge.url}/p.git/git-upload-pack`, {
          method: "POST",
          headers: {
            "git-protocol": "version=2",
            "content-type": "application/x-git-upload-pack-request",
            ...(authorization ? { authorization } : {}),
          },
          body: plain as Uint8Array<ArrayBuffer>,
        });
        const body = latin1(new Uint8Array(await res.arrayBuffer()));
        const who = authorization === basic ? "alice" : authorization ? "a wrong password" : "anon";
        assertEquals(res.status, authorization === basic ? 200 : 401, `plain fetch by ${who}`);
        assertEquals(body.includes("PACK"), authorization === basic, `pack bytes to ${who}`);
      }
      // No credential in any stored key or object (manifest, packs, cached answers), in clear
      // text or as the Basic header's base64.
      const stored = await w.edge.listStored("");
      assert(stored.some((k) => k.endsWith("manifest.json")), `a manifest: ${stored.join(", ")}`);
      const secrets = ["s3cret", "alice:", btoa("alice:s3cret")];
      for (const key of stored) {
        const text = `${key}\n${latin1(await w.edge.readStored(key))}`;
        const found = secrets.filter((secret) => text.includes(secret));
        assertEquals(found, [], `credentials stored in ${key}`);
      }
    },
    { originOptions: { requireAuth: { user: "alice", password: "s3cret" } } },
  );

  t("metrics count requests, URIs handed out, cache and origin bytes", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 10, binaryBytes: 300_000 });
    await warm(w.edge, "r.git");
    await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/a`]);
    const text = await (await fetch(`${w.edge.url}/_edge/metrics`)).text();
    const value = (name: string) =>
      Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, "m").exec(text)?.[1] ?? NaN);
    assert(value("gitedge_packfile_uris_total") >= 2, `URIs counted:\n${text}`);
    assert(value("gitedge_cache_bytes_total") > 300_000, "cache bytes counted");
    assert(value("gitedge_origin_bytes_total") > 0, "origin bytes counted");
    assertEquals(value("gitedge_snapshot_builds_total"), 1, "one build");
  });

  t("multi-origin mode reaches allow-listed hosts only", async (w) => {
    await makeRepo(w.origin, "m.git", { commits: 5 });
    const host = new URL(w.origin.url).host;
    await w.git(["clone", "-q", `${w.edge.url}/${host}/m.git`, `${w.dir}/a`]);
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/a` });
    const res = await fetch(`${w.edge.url}/evil.example/m.git/info/refs?service=git-upload-pack`);
    assertEquals(res.status, 403, "host not on the allowlist");
    await res.body?.cancel();
  }, { edge: (o) => ({ origin: undefined, allowHosts: [new URL(o.url).host] }) });

  t("an admin token guards warm and status", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 4 });
    for (const [method, route] of [["POST", "warm"], ["GET", "status"]]) {
      for (const authorization of [undefined, "Bearer wrong", "Bearer s3cret-admi"]) {
        const res = await fetch(`${w.edge.url}/_edge/${route}/r.git`, {
          method,
          headers: authorization ? { authorization } : {},
        });
        assertEquals(res.status, 401, `${route} with ${authorization ?? "no token"}`);
        await res.body?.cancel();
      }
    }
    const admin = { authorization: "Bearer s3cret-admin" };
    assertEquals((await warm(w.edge, "r.git", admin)).state, "ready", "warm with the token");
    const res = await fetch(`${w.edge.url}/_edge/status/r.git`, { headers: admin });
    assertEquals(res.status, 200, "status with the token");
    await res.body?.cancel();
    // Git traffic itself needs no admin token.
    await w.git(["clone", "-q", `${w.edge.url}/r.git`, `${w.dir}/a`]);
  }, { edge: () => ({ adminToken: "s3cret-admin" }) });
}
