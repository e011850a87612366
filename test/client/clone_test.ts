import { assert, assertEquals, assertMatch, assertRejects } from "../support/assert.ts";
import { clone } from "../../src/client/clone.ts";
import { exitCodeFor } from "../../src/client/clone_cli.ts";
import { AuthenticationError, CloneError } from "../../src/client/errors.ts";
import { ProtocolError } from "../../src/git/errors.ts";
import { git, GIT_ENV, gitBytes, tempDir } from "../support/git.ts";
import { startOrigin } from "../support/origin.ts";
import { assertSameClone } from "../support/fixtures.ts";
import { startFileServer } from "../support/relay.ts";
import { serveLoopback } from "../support/http_server.ts";
import { SeededRandom } from "../support/random.ts";

/** A work repository with two branches, an annotated and a lightweight tag, pushed to `bare`. */
async function seedRepo(work: string, bare: string, objectFormat = "sha1"): Promise<void> {
  await git(["init", "-q", "--initial-branch=main", `--object-format=${objectFormat}`, work]);
  const commit = async (file: string, text: string, message: string) => {
    await Deno.writeTextFile(`${work}/${file}`, text);
    await git(["add", file], { cwd: work });
    await git(["commit", "-q", "-m", message], { cwd: work });
  };
  await commit("README", "hello\n", "first");
  await commit("src.txt", "x\n".repeat(2000), "second");
  await git(["tag", "-a", "-m", "release 1", "v1"], { cwd: work });
  await git(["checkout", "-q", "-b", "feature"], { cwd: work });
  await commit("feature.txt", "feature\n", "feature work");
  await git(["tag", "light"], { cwd: work });
  await git(["checkout", "-q", "main"], { cwd: work });
  await commit("README", "hello again\n", "third");
  await git(["push", "-q", "--mirror", bare], { cwd: work });
}

/** Refs, HEAD, config that matters and the work tree must match a `git clone`. */
async function assertSameAsGitClone(ours: string, theirs: string, bare = false): Promise<void> {
  const refs = (dir: string) =>
    git(["for-each-ref", "--format=%(refname) %(objectname) %(symref)"], { cwd: dir });
  assertEquals(await refs(ours), await refs(theirs), "refs");
  const head = (dir: string) =>
    git(["symbolic-ref", "-q", "HEAD"], { cwd: dir }).catch(() => "(detached)");
  assertEquals(await head(ours), await head(theirs), "HEAD");
  const config = (dir: string) =>
    git(["config", "--get-regexp", "^(remote|branch)\\."], { cwd: dir }).catch(() => "");
  assertEquals(await config(ours), await config(theirs), "remote and branch config");
  if (!bare) {
    const tree = (dir: string) => git(["ls-files", "-s"], { cwd: dir });
    assertEquals(await tree(ours), await tree(theirs), "index");
    assertEquals(await git(["status", "--porcelain"], { cwd: ours }), "", "clean work tree");
  }
  await assertSameClone(ours, theirs);
}

Deno.test("clone without packfile URIs equals git clone, and a later fetch works", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const bare = await origin.createBare("team/app.git");
  await seedRepo(`${dir.path}/work`, bare);
  const url = origin.repoUrl("team/app.git");

  const summary = await clone({ url, directory: `${dir.path}/ours` });
  await git(["clone", "-q", url, `${dir.path}/theirs`]);
  await assertSameAsGitClone(`${dir.path}/ours`, `${dir.path}/theirs`);
  assertEquals(summary.packs, []);
  assertEquals(summary.bytesByUri, 0);
  assert(summary.bytesInline > 0);
  assertEquals(summary.head, "refs/heads/main");
  assertEquals(await Deno.readTextFile(`${dir.path}/ours/README`), "hello again\n");

  // The origin moves; ordinary git fetch and pull work in our clone.
  await Deno.writeTextFile(`${dir.path}/work/new.txt`, "new\n");
  await git(["add", "new.txt"], { cwd: `${dir.path}/work` });
  await git(["commit", "-q", "-m", "fourth"], { cwd: `${dir.path}/work` });
  await git(["push", "-q", bare, "main"], { cwd: `${dir.path}/work` });
  await git(["pull", "-q", "--ff-only"], { cwd: `${dir.path}/ours` });
  assertEquals(
    await git(["rev-parse", "HEAD"], { cwd: `${dir.path}/ours` }),
    await git(["rev-parse", "HEAD"], { cwd: `${dir.path}/work` }),
  );
});

Deno.test("clone --bare and --branch match git clone", async (t) => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const bare = await origin.createBare("app.git");
  await seedRepo(`${dir.path}/work`, bare);
  const url = origin.repoUrl("app.git");

  await t.step("--bare", async () => {
    await clone({ url, directory: `${dir.path}/ours.git`, bare: true });
    await git(["clone", "-q", "--bare", url, `${dir.path}/theirs.git`]);
    await assertSameAsGitClone(`${dir.path}/ours.git`, `${dir.path}/theirs.git`, true);
  });
  await t.step("--branch", async () => {
    const summary = await clone({ url, directory: `${dir.path}/b1`, branch: "feature" });
    await git(["clone", "-q", "--branch", "feature", url, `${dir.path}/b2`]);
    await assertSameAsGitClone(`${dir.path}/b1`, `${dir.path}/b2`);
    assertEquals(summary.head, "refs/heads/feature");
    assertEquals(await Deno.readTextFile(`${dir.path}/b1/feature.txt`), "feature\n");
  });
});

Deno.test("gitedge clone CLI: --json summary, usage and a 404 repository", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const bare = await origin.createBare("cli.git");
  await seedRepo(`${dir.path}/work`, bare);

  const run = (args: string[]) => runCli(args, dir.path);

  const ok = await run([origin.repoUrl("cli.git"), "--json", "--jobs", "2"]);
  assertEquals(ok.code, 0, ok.stderr);
  const summary = JSON.parse(ok.stdout);
  assertEquals(summary.packs, []);
  assert(summary.bytesInline > 0);
  // Like git: `Cloning into` and (ours) a one-line summary on stderr; -q prints nothing.
  assertMatch(ok.stderr, /^Cloning into 'cli'\.\.\.\nReceived \d.* into 'cli'\.\n$/);
  const quiet = await run(["-q", "--json", origin.repoUrl("cli.git"), "cli-q"]);
  assertEquals(quiet.code, 0, quiet.stderr);
  assertEquals(quiet.stderr, "", "-q prints nothing");
  await git(["fsck", "--full"], { cwd: `${dir.path}/cli` });

  const missing = await run([origin.repoUrl("nope.git"), `${dir.path}/nope`]);
  assertEquals(missing.code, 3, missing.stderr);
  assert(missing.stderr.includes("404"), missing.stderr);
  assertEquals(await Deno.stat(`${dir.path}/nope`).then(() => true, () => false), false);

  assertEquals((await run(["--jobs", "x", origin.repoUrl("cli.git")])).code, 2);
  assertEquals((await run([])).code, 2);
  const help = await run(["--help"]);
  assertEquals(help.code, 0);
  assert(help.stdout.includes("exit codes"), help.stdout);
});

Deno.test("clone downloads announced packfile URIs (git's blobPackfileUri) and resumes them", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const bare = await origin.createBare("uris.git");
  const work = `${dir.path}/work`;
  await seedRepo(work, bare);
  // A big blob that the origin will hand out as a packfile URI instead of inline.
  const big = new SeededRandom(7).bytes(300 * 1024);
  await Deno.writeFile(`${work}/big.bin`, big);
  await git(["add", "big.bin"], { cwd: work });
  await git(["commit", "-q", "-m", "big"], { cwd: work });
  await git(["push", "-q", bare, "main"], { cwd: work });
  const blob = (await git(["rev-parse", "HEAD:big.bin"], { cwd: work })).trim();
  const pack = await gitBytes(["pack-objects", "--stdout", "-q"], {
    cwd: bare,
    stdin: new TextEncoder().encode(`${blob}\n`),
  });
  const hash = Array.from(pack.subarray(pack.length - 20), (b) => b.toString(16).padStart(2, "0"))
    .join("");
  await Deno.writeFile(`${dir.path}/big.pack`, pack);
  await using server = await startFileServer({
    files: { "/big.pack": `${dir.path}/big.pack` },
    faults: {
      "/big.pack": { kind: "truncate", afterBytes: Math.floor(pack.length / 2), times: 1 },
    },
  });
  // git's upload-pack honours packfile-uris only together with sideband-all.
  await git(["config", "uploadpack.allowSidebandAll", "true"], { cwd: bare });
  await git(
    ["config", "uploadpack.blobPackfileUri", `${blob} ${hash} ${server.url}/big.pack`],
    {
      cwd: bare,
    },
  );

  const events: string[] = [];
  const summary = await clone({
    url: origin.repoUrl("uris.git"),
    directory: `${dir.path}/ours`,
    progress: {
      phase: (name) => events.push(name),
      inline: () => {},
      packEvent: (e) => events.push(e.type),
    },
  });
  assertEquals(summary.packs.map((p) => [p.hash, p.bytes, p.retries]), [[hash, pack.length, 1]]);
  assertEquals(summary.bytesByUri, pack.length);
  assert(summary.bytesInline < pack.length, "the big blob did not come inline");
  assertEquals(
    server.stats.log.map((r) => r.range === null),
    [true, false],
    "second request resumed",
  );
  assert(events.includes("retry") && events.includes("done"), events.join(","));
  await git(["clone", "-q", origin.repoUrl("uris.git"), `${dir.path}/theirs`]);
  await assertSameClone(`${dir.path}/ours`, `${dir.path}/theirs`);
  const checkedOut = await Deno.readFile(`${dir.path}/ours/big.bin`);
  assert(checkedOut.length === big.length && checkedOut.every((b, i) => b === big[i]));
});

Deno.test("clone authenticates from the URL, GITEDGE_AUTHORIZATION or git credential", async (t) => {
  await using dir = await tempDir();
  await using origin = await startOrigin({ requireAuth: { user: "ann", password: "s3cret" } });
  const bare = await origin.createBare("private.git");
  await seedRepo(`${dir.path}/work`, bare);
  const plain = origin.repoUrl("private.git");
  const withUser = plain.replace("http://", "http://ann:s3cret@");

  await t.step("user:password in the URL, kept in remote.origin.url like git", async () => {
    await clone({ url: withUser, directory: `${dir.path}/a` });
    await git(["clone", "-q", withUser, `${dir.path}/a-git`]);
    await assertSameAsGitClone(`${dir.path}/a`, `${dir.path}/a-git`);
  });
  await t.step("GITEDGE_AUTHORIZATION", async () => {
    const summary = await clone({
      url: plain,
      directory: `${dir.path}/b`,
      authorization: `Basic ${btoa("ann:s3cret")}`,
    });
    assertEquals(summary.head, "refs/heads/main");
  });
  await t.step("git credential fill, approve and reject", async () => {
    const calls: string[] = [];
    const helper = (password: string) => ({
      fill: () => Promise.resolve({ username: "ann", password }),
      approve: () => (calls.push("approve"), Promise.resolve()),
      reject: () => (calls.push("reject"), Promise.resolve()),
    });
    await clone({ url: plain, directory: `${dir.path}/c`, credentialHelper: helper("s3cret") });
    assertEquals(calls, ["approve"]);
    const error = await assertRejects(
      () => clone({ url: plain, directory: `${dir.path}/d`, credentialHelper: helper("wrong") }),
      AuthenticationError,
    );
    assertEquals(calls, ["approve", "reject"]);
    assertEquals(exitCodeFor(error), 3);
    assertEquals(await exists(`${dir.path}/d`), false, "the failed clone removed its directory");
  });
  await t.step("the CLI never prints credentials", async () => {
    const bad = plain.replace("http://", "http://ann:hunter2@");
    const out = await runCli([bad, `${dir.path}/e`], dir.path);
    assertEquals(out.code, 3, out.stderr);
    assert(out.stderr.includes("authentication failed"), out.stderr);
    assert(!out.stderr.includes("hunter2"), out.stderr);
  });
});

Deno.test("clone of an empty repository, into a non-empty directory, and --branch of a tag", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await origin.createBare("empty.git");
  const summary = await clone({ url: origin.repoUrl("empty.git"), directory: `${dir.path}/e` });
  assertEquals(summary.head, "refs/heads/main");
  assertEquals(summary.bytesInline, 0);
  assertEquals(
    (await git(["symbolic-ref", "HEAD"], { cwd: `${dir.path}/e` })).trim(),
    "refs/heads/main",
  );
  assertEquals(
    (await git(["config", "remote.origin.url"], { cwd: `${dir.path}/e` })).trim(),
    origin.repoUrl("empty.git"),
  );

  await Deno.mkdir(`${dir.path}/full`);
  await Deno.writeTextFile(`${dir.path}/full/keep.txt`, "mine\n");
  const error = await assertRejects(
    () => clone({ url: origin.repoUrl("empty.git"), directory: `${dir.path}/full` }),
    CloneError,
  );
  assert(error.message.includes("not empty"), error.message);
  assertEquals(await Deno.readTextFile(`${dir.path}/full/keep.txt`), "mine\n");

  const bare = await origin.createBare("tags.git");
  await seedRepo(`${dir.path}/work`, bare);
  await clone({ url: origin.repoUrl("tags.git"), directory: `${dir.path}/t1`, branch: "v1" });
  await git(["clone", "-q", "--branch", "v1", origin.repoUrl("tags.git"), `${dir.path}/t2`]);
  await assertSameAsGitClone(`${dir.path}/t1`, `${dir.path}/t2`);
  await assertRejects(
    () => clone({ url: origin.repoUrl("tags.git"), directory: `${dir.path}/t3`, branch: "nope" }),
    CloneError,
  );
  assertEquals(await exists(`${dir.path}/t3`), false);
});

/**
 * A loopback front for `origin` that logs each request as `GET info/refs` or `POST <command>` and
 * each advertisement answer as `answered info/refs`. With `holdAdvertisement`, the advertisement's
 * answer waits until an `ls-refs` request has arrived (at most 3 s); with `v0`, the `Git-Protocol`
 * header is dropped, so the origin answers as a server without protocol v2.
 */
function startFront(origin: string, opts: { holdAdvertisement?: boolean; v0?: boolean } = {}) {
  const log: string[] = [];
  const lsRefsArrived = Promise.withResolvers<void>();
  const server = serveLoopback(async (req) => {
    const url = new URL(req.url);
    const headers = new Headers(req.headers);
    if (opts.v0) headers.delete("git-protocol");
    const body = req.body ? new Uint8Array(await req.arrayBuffer()) : undefined;
    const command = body ? /command=([a-z-]+)/.exec(new TextDecoder().decode(body))?.[1] : "";
    const advertisement = url.pathname.endsWith("/info/refs");
    log.push(advertisement ? "GET info/refs" : `POST ${command}`);
    if (command === "ls-refs") lsRefsArrived.resolve();
    let answer: Response;
    let bytes: ArrayBuffer;
    try {
      answer = await fetch(`${origin}${url.pathname}${url.search}`, {
        method: req.method,
        headers,
        body,
      });
      bytes = await answer.arrayBuffer();
    } catch (error) {
      return new Response(`front: ${error}\n`, { status: 502 });
    }
    if (advertisement && opts.holdAdvertisement) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<void>((resolve) => timer = setTimeout(resolve, 3000));
      await Promise.race([lsRefsArrived.promise, late]);
      clearTimeout(timer);
    }
    if (advertisement) log.push("answered info/refs");
    return new Response(bytes, { status: answer.status, headers: answer.headers });
  });
  return { url: server.url, log, [Symbol.asyncDispose]: server.stop };
}

Deno.test("clone sends ls-refs along with the capability request, and equals git clone", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const bare = await origin.createBare("app.git");
  await seedRepo(`${dir.path}/work`, bare);
  await using front = startFront(origin.url, { holdAdvertisement: true });
  const url = `${front.url}/app.git`;

  await clone({ url, directory: `${dir.path}/ours` });
  const at = (entry: string) => front.log.indexOf(entry);
  assert(at("POST ls-refs") >= 0 && at("POST ls-refs") < at("answered info/refs"), `${front.log}`);
  assertEquals(origin.stats.commands["ls-refs"], 1, "the early ls-refs answer was used");
  await git(["clone", "-q", origin.repoUrl("app.git"), `${dir.path}/theirs`]);
  await git(["remote", "set-url", "origin", url], { cwd: `${dir.path}/theirs` });
  await assertSameAsGitClone(`${dir.path}/ours`, `${dir.path}/theirs`);
});

Deno.test("the early ls-refs is asked again when the advertisement differs (SHA-256), and a server without v2 fails as before", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const bare = await origin.createBare("sha256.git", { objectFormat: "sha256" });
  await seedRepo(`${dir.path}/work`, bare, "sha256");
  const url = origin.repoUrl("sha256.git");
  await clone({ url, directory: `${dir.path}/ours` });
  assertEquals(origin.stats.commands["ls-refs"], 2, "sent early, then again for object-format");
  await git(["clone", "-q", url, `${dir.path}/theirs`]);
  await assertSameAsGitClone(`${dir.path}/ours`, `${dir.path}/theirs`);

  await using v0 = startFront(origin.url, { v0: true });
  const error = await assertRejects(
    () => clone({ url: `${v0.url}/sha256.git`, directory: `${dir.path}/v0` }),
    ProtocolError,
  );
  assert(error.message.includes("version 2"), error.message);
  assert(
    v0.log.includes("POST ls-refs"),
    "the early ls-refs went out (and its failure is dropped)",
  );
  assertEquals(await exists(`${dir.path}/v0`), false, "the failed clone removed its directory");
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/** Runs `gitedge clone ARGS` as a subprocess (stdout and stderr are not terminals). */
async function runCli(args: string[], cwd: string) {
  const cli = new URL("../../edge/deno/cli.ts", import.meta.url).pathname;
  const command = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", cli, "clone", ...args],
    cwd,
    env: GIT_ENV,
    stdout: "piped",
    stderr: "piped",
  });
  const out = await command.output();
  const decoder = new TextDecoder();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}
