/**
 * Edge suite part: What passes through: every kind of fetch and push, commands the edge does not act on, repository paths, bad input and faults, oversized requests.
 * Registered per runtime by `edgeSuite` (edge_suite.ts).
 */
import { GitCommandError } from "../support/git.ts";
import { encodePkts } from "../../src/git/pktline.ts";
import { addCommits, assertSameClone, makeRepo, refsOf } from "../support/fixtures.ts";
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { rawGet } from "../support/raw_http.ts";
import { URI_CLONE, urisFetched } from "../support/traced_git.ts";
import {
  latin1,
  passthroughCounts,
  postUploadPack,
  rawStatusOf,
  status,
  statusOf,
  type Suite,
  warm,
} from "./edge_world.ts";

export function protocolCases({ t, gits, bundleUris }: Suite): void {
  t("fetch, shallow, partial, single-branch clones and push work through the edge", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 15, branches: 2, tags: 1 });
    await warm(w.edge, "r.git");
    const url = `${w.edge.url}/r.git`;
    await w.git([...URI_CLONE.slice(0, 4), "clone", "-q", url, `${w.dir}/c`]);
    await addCommits(w.origin, "r.git", { commits: 2 });
    // Each kind of fetch that must not get URIs: none fetched, and counted under its reason.
    const passedThrough = async (reason: string, run: () => Promise<string>) => {
      const before = (await passthroughCounts(w.edge))[reason] ?? 0;
      const trace = await run();
      assertEquals(urisFetched(trace), [], `${reason}: no packfile URIs`);
      const after = (await passthroughCounts(w.edge))[reason] ?? 0;
      assert(after > before, `${reason}: counted as passthrough (${before} -> ${after})`);
    };
    await passedThrough(
      "incremental fetch",
      () =>
        w.tracedGit(["-c", "fetch.uriProtocols=http", "fetch", "-q", "origin"], {
          cwd: `${w.dir}/c`,
        }),
    );
    await w.git(["pull", "-q", "--ff-only"], { cwd: `${w.dir}/c` });
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/c` });
    const originRefs = await refsOf(`${w.origin.root}/r.git`);
    const head = (await w.git(["rev-parse", "HEAD"], { cwd: `${w.dir}/c` })).trim();
    assertEquals(head, originRefs["refs/heads/main"], "pulled to origin's main");

    await passedThrough(
      "shallow",
      () => w.tracedGit([...URI_CLONE, "--depth", "1", url, `${w.dir}/shallow`]),
    );
    assertEquals(
      (await w.git(["rev-list", "--count", "HEAD"], { cwd: `${w.dir}/shallow` })).trim(),
      "1",
      "depth 1",
    );
    await passedThrough(
      "partial clone",
      () => w.tracedGit([...URI_CLONE, "--filter=blob:none", url, `${w.dir}/partial`]),
    );
    await w.git(["fsck", "--connectivity-only"], { cwd: `${w.dir}/partial` });
    // wait-for-done (the client will say when negotiation is done): passed through untouched.
    // Without haves git's upload-pack answers with the pack at once; the edge adds no URIs.
    const tip = (await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"];
    const before = (await passthroughCounts(w.edge))["wait-for-done"] ?? 0;
    const request = ["command=fetch\n", "delim", `want ${tip}\n`, "wait-for-done\n"];
    const negotiation = await postUploadPack(
      url,
      encodePkts([...request, "packfile-uris http\n", "flush"]),
    );
    const answer = latin1(new Uint8Array(await negotiation.arrayBuffer()));
    assertEquals(negotiation.status, 200, answer.slice(0, 200));
    assert(answer.includes("packfile\n"), `a packfile: ${answer.slice(0, 200)}`);
    assert(!answer.includes("packfile-uris"), `no packfile-uris: ${answer.slice(0, 200)}`);
    assertEquals(
      (await passthroughCounts(w.edge))["wait-for-done"],
      before + 1,
      "counted as wait-for-done",
    );
    await w.git([...URI_CLONE, "--single-branch", "--branch", "main", url, `${w.dir}/single`]);
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/single` });

    await Deno.writeTextFile(`${w.dir}/c/pushed.txt`, "through the edge\n");
    await w.git(["add", "pushed.txt"], { cwd: `${w.dir}/c` });
    await w.git(["commit", "-qm", "push through edge"], { cwd: `${w.dir}/c` });
    await w.git(["push", "-q", "origin", "HEAD:main"], { cwd: `${w.dir}/c` });
    const pushed = (await w.git(["rev-parse", "HEAD"], { cwd: `${w.dir}/c` })).trim();
    assertEquals(
      (await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"],
      pushed,
      "push landed",
    );
  });

  t("repository paths beyond [A-Za-z0-9._~-] proxy; traversal still refused", async (w) => {
    const names = ["a+b.git", "a@b.git", "a b.git", "ünï.git", "x/y z+ü.git"];
    for (const name of names) await makeRepo(w.origin, name, { commits: 3, tags: 1 });
    await Promise.all(names.map(async (name, i) => {
      const edgeUrl = `${w.edge.url}/${new URL(w.origin.repoUrl(name)).pathname.slice(1)}`;
      await w.git(["clone", "-q", "--mirror", w.origin.repoUrl(name), `${w.dir}/d${i}`]);
      await w.git([...URI_CLONE, "--mirror", edgeUrl, `${w.dir}/e${i}`]);
      await assertSameClone(`${w.dir}/d${i}`, `${w.dir}/e${i}`);
    }));
    assertEquals((await warm(w.edge, "a%20b.git")).state, "ready", "warm an encoded path");
    // Sent as written: the runtime's URL parsing resolves encoded dot segments (never above the
    // root), the edge refuses a backslash or a control character.
    for (const path of ["%2e%2e/%2e%2e/etc.git", "a/%2E%2E/%2e%2e/x.git"]) {
      const st = await rawStatusOf(w.edge.url, `/${path}/info/refs?service=git-upload-pack`);
      assert(st === 400 || st === 404, `${path}: ${st}`);
    }
    for (const path of ["a%5C..%5Cb.git", "a%00.git", "a%0a.git"]) {
      assertEquals(await rawStatusOf(w.edge.url, `/${path}/info/refs`), 400, path);
    }
  });

  t("bundle-uri and other commands the edge does not act on pass through as sent", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 12, branches: 2, tags: 1 });
    const bundles = bundleUris ? await w.origin.publishBundle("r.git") : null;
    await addCommits(w.origin, "r.git", { commits: 2 });
    const url = `${w.edge.url}/r.git`;
    const bundleClone = ["-c", "transfer.bundleURI=true", ...URI_CLONE.slice(0, 4), "clone", "-q"];
    await w.git([...bundleClone, "--mirror", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
    w.origin.stats.reset();
    await w.git([...bundleClone, "--mirror", url, `${w.dir}/edge`]);
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/edge`);
    const downloads = w.origin.stats.byPath[`GET ${new URL(bundles ?? "http://x/").pathname}`];
    if (bundles && gits.client.version[1] >= 40) {
      assert(downloads?.requests >= 1, `the client downloaded the bundle list's bundle`);
    }
    // object-info with its capability lines before command= (git >= 2.40 writes them so): the
    // origin gets the request as sent, and the answer is the origin's own.
    await w.git(["config", "transfer.advertiseObjectInfo", "true"], {
      cwd: `${w.origin.root}/r.git`,
    });
    const main = (await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"];
    const info = encodePkts([
      "agent=git/2.55.0",
      "object-format=sha1",
      "command=object-info",
      "delim",
      "size",
      `oid ${main}`,
      "flush",
    ]);
    const viaEdge = await postUploadPack(url, info);
    const direct = await postUploadPack(w.origin.repoUrl("r.git"), info);
    const answer = await direct.text();
    assert(answer.includes(main), `the origin answers object-info: ${answer}`);
    assertEquals([viaEdge.status, await viaEdge.text()], [200, answer], "object-info");
  });

  t("bad input and faults get clear errors or a safe fallback", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 10, binaryBytes: 300_000 });
    const snap = await warm(w.edge, "r.git");
    // Malformed pkt-lines.
    const bad = await fetch(`${w.edge.url}/r.git/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
      },
      body: "zzzzcommand=fetch\n",
    });
    assertEquals(bad.status, 400, "malformed pkt-line");
    assert((await bad.text()).includes("gitedge"), "clear message");
    // Paths escaping the repository, sent as raw bytes (fetch would normalise `..` away): the
    // edge's own guard answers, and the origin sees nothing.
    const before = w.origin.stats.requests;
    for (
      const target of [
        "/r.git/..%2f..%2fetc/passwd/info/refs?service=git-upload-pack",
        "/..%2F..%2Fetc/passwd/info/refs?service=git-upload-pack",
        "/r.git/%2e%2e%2f%2e%2e%2fsecret.git/info/refs?service=git-upload-pack",
      ]
    ) {
      const res = await rawGet(w.edge.url, target);
      assertEquals(res.status, 400, `${target}: ${res.body}`);
      assert(res.body.startsWith("gitedge: bad repository path"), `${target}: ${res.body}`);
    }
    assertEquals(w.origin.stats.requests, before, "no escaping path reached the origin");
    // A literal `..` in the request line is resolved by the server's URL parsing before routing:
    // whatever answers, no path outside the origin's repositories is asked for.
    const dotted = await rawGet(w.edge.url, "/r.git/../../etc/passwd/info/refs");
    assert(dotted.status === 400 || dotted.status === 404, `literal ..: ${dotted.status}`);
    const asked = Object.keys(w.origin.stats.byPath);
    assert(!asked.some((k) => /\.\.|%2e/i.test(k)), `origin asked for ${asked.join(", ")}`);
    // A bogus signature and an expired URL.
    const trace = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/a`]);
    const uri = urisFetched(trace)[0].uri;
    const forged = uri.replace(/sig=[^&]+/, "sig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    assertEquals(await statusOf(forged), 403, "forged signature refused");
    const expired = uri.replace(/exp=\d+/, "exp=1000");
    assertEquals(await statusOf(expired), 403, "expired URL refused");
    const ok = await fetch(uri, { headers: { range: "bytes=0-3" } });
    assertEquals(ok.status, 206, "range request");
    assertEquals(await ok.text(), "PACK", "pack starts with PACK");
    // The whole pack, then HEAD, an unsatisfiable range, If-Range and caching headers.
    const whole = await fetch(uri);
    const bytes = new Uint8Array(await whole.arrayBuffer());
    const size = bytes.length;
    const etag = whole.headers.get("etag");
    assertEquals(whole.status, 200, "whole pack");
    assert(etag && /^"[^"]+"$/.test(etag), `a strong ETag: ${etag}`);
    assertMatch(whole.headers.get("cache-control") ?? "", /\bimmutable\b/, "immutable");
    assertMatch(whole.headers.get("cache-control") ?? "", /\bmax-age=\d+/, "max-age");
    assertEquals(whole.headers.get("accept-ranges"), "bytes", "accept-ranges");
    const head = await fetch(uri, { method: "HEAD" });
    assertEquals(head.status, 200, "HEAD");
    assertEquals(head.headers.get("content-length"), String(size), "HEAD length");
    assertEquals(head.headers.get("etag"), etag, "HEAD ETag");
    assertEquals((await head.arrayBuffer()).byteLength, 0, "HEAD has no body");
    // (`bytes=<size>-` exactly is git resuming a complete download: 204, tested above.)
    const past = await fetch(uri, { headers: { range: `bytes=${size + 1}-` } });
    await past.body?.cancel();
    assertEquals(past.status, 416, "range past the end");
    assertEquals(past.headers.get("content-range"), `bytes */${size}`, "416 content-range");
    const tail = await fetch(uri, { headers: { range: "bytes=-20", "if-range": etag } });
    assertEquals(tail.status, 206, "If-Range with the current ETag: the range");
    assertEquals(tail.headers.get("content-range"), `bytes ${size - 20}-${size - 1}/${size}`);
    assertEquals(new Uint8Array(await tail.arrayBuffer()), bytes.subarray(size - 20), "the tail");
    const stale = await fetch(uri, { headers: { range: "bytes=-20", "if-range": '"other"' } });
    assertEquals(stale.status, 200, "If-Range with another ETag: the whole pack");
    assertEquals((await stale.arrayBuffer()).byteLength, size, "whole pack again");
    // A pack deleted from the store: the snapshot is not advertised, clones pass through.
    const keys = await w.edge.listStored("repos/");
    const packKey = keys.find((k) => k.endsWith(".pack"));
    assert(packKey, `a stored pack (${keys.join(", ")})`);
    await w.edge.deleteStored(packKey);
    const trace2 = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/b`]);
    assertEquals(urisFetched(trace2).length, 0, "no URIs for a broken snapshot");
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/b` });
    // That clone also started a fresh rebuild; once it is in, URIs flow again.
    await w.edge.settled("r.git", (st) => st.builds === 2);
    const st = await status(w.edge, "r.git");
    assertEquals(st.builds, 2, "the broken snapshot was rebuilt");
    const trace3 = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/b2`]);
    assertEquals(
      urisFetched(trace3).length,
      (st.packs as unknown[]).length,
      "URIs again after the rebuild",
    );
    void snap;
    // A stopped origin: 502 with a message git prints.
    await w.origin.stop();
    const err = await w.git(["clone", "-q", `${w.edge.url}/r.git`, `${w.dir}/c`]).then(
      () => "",
      (e: GitCommandError) => e.stderr,
    );
    assert(/502|origin unreachable/.test(err), `git reports the unreachable origin: ${err}`);
  });

  t("oversized requests the edge parses get 413; pushes stream through", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 3 });
    // A well-formed request that just goes on: only the byte limit can stop it.
    const want = `want ${"a".repeat(40)}\n`;
    const lines = Array.from({ length: 2000 }, () => want);
    const big = encodePkts(["command=fetch\n", "delim", ...lines, "flush"]);
    const res = await postUploadPack(`${w.edge.url}/r.git`, big);
    assertEquals(res.status, 413, "too large");
    assert((await res.text()).includes("exceeds"), "says why");
    // The cap is for requests the edge parses; a push streams through whatever its size.
    await w.git(["clone", "-q", `${w.edge.url}/r.git`, `${w.dir}/c`]);
    await Deno.writeFile(`${w.dir}/c/big.bin`, crypto.getRandomValues(new Uint8Array(60_000)));
    await Deno.writeFile(`${w.dir}/c/big2.bin`, crypto.getRandomValues(new Uint8Array(60_000)));
    await w.git(["add", "."], { cwd: `${w.dir}/c` });
    await w.git(["commit", "-qm", "a push larger than the cap"], { cwd: `${w.dir}/c` });
    await w.git(["push", "-q", "origin", "HEAD:main"], { cwd: `${w.dir}/c` });
    const pushed = (await w.git(["rev-parse", "HEAD"], { cwd: `${w.dir}/c` })).trim();
    assertEquals((await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"], pushed, "pushed");
  }, { edge: () => ({ maxRequestBytes: 16 * 1024 }) });
}
