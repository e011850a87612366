/**
 * `gitedge serve`'s log through a real process (src/proxy/core/log.ts): stdout not being a terminal,
 * every line is one JSON record: the settings at start, a record per request of a clone, the
 * build's lifecycle, origin errors and a failed build; no secret in any line (the admin token,
 * the signing key, the client's credentials given in the URL).
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { startServeProcess } from "../../support/serve_process.ts";
import { URI_CLONE } from "../../proxy/edge_suite.ts";

const USER = "log-user";
const PASSWORD = "s3cret-pass-in-url";
const ADMIN = "admin-token-never-logged";
const KEY_HEX = "5e".repeat(24);

Deno.test("gitedge serve's log: settings, a record per request, the build's lifecycle, origin errors; never a secret", async () => {
  const origin = await startOrigin({ requireAuth: { user: USER, password: PASSWORD } });
  let originUp = true;
  try {
    await makeRepo(origin, "r.git", { commits: 6, binaryBytes: 100_000 });
    await using dir = await tempDir();
    await using edge = await startServeProcess(
      ["--origin", origin.url, "--store", `${dir.path}/store`, "--log-level", "debug"],
      { env: { GITEDGE_ADMIN_TOKEN: ADMIN, GITEDGE_SIGNING_KEY: KEY_HEX } },
    );
    const withCredentials = (base: string) =>
      base.replace("http://", `http://${USER}:${PASSWORD}@`) + "/r.git";
    const records = () => edge.stdout().trim().split("\n").map((line) => JSON.parse(line));

    // A clone through the edge (it passes through and starts a build), then the build.
    await git([...URI_CLONE, "--bare", withCredentials(edge.url), `${dir.path}/a.git`]);
    const warm = await fetch(`${edge.url}/_edge/warm/r.git`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${ADMIN}`,
        "x-origin-authorization": `Basic ${btoa(`${USER}:${PASSWORD}`)}`,
      },
    });
    assertEquals(warm.status, 200, await warm.text());
    await git([...URI_CLONE, "--bare", withCredentials(edge.url), `${dir.path}/b.git`]);
    await git(["clone", "-q", "--bare", withCredentials(origin.url), `${dir.path}/direct.git`]);
    await assertSameClone(`${dir.path}/b.git`, `${dir.path}/direct.git`);

    const settings = records().find((r) => r.event === "settings");
    assertEquals(settings?.origin, origin.url);
    assertEquals(settings?.logLevel, "debug");
    assertEquals(settings?.adminToken, "***", "a secret's presence, never its value");
    const requests = records().filter((r) => r.event === "request");
    for (const r of requests) {
      for (const field of ["time", "level", "method", "route", "status", "durationMs", "action"]) {
        assert(r[field] !== undefined, `${field} in ${JSON.stringify(r)}`);
      }
    }
    const info = requests.find((r) => r.route === "info/refs" && r.status === 200);
    assertEquals([info?.method, info?.repo, info?.action], ["GET", "r.git", "proxied"]);
    assert(typeof info?.originMs === "number", "origin time");
    const passed = requests.find((r) => r.action === "passthrough");
    assertEquals(passed?.reason, "no snapshot", JSON.stringify(passed));
    const answered = requests.find((r) => r.action === "answered" || r.action === "rewrote");
    assert(answered && answered.packUris > 0 && answered.bytes > 0, JSON.stringify(answered));
    const packs = requests.filter((r) => r.route === "pack");
    assert(packs.length > 0 && packs.every((r) => r.status === 200 && r.bytes > 0));
    const steps = records().filter((r) => r.event === "build.step").map((r) => r.step);
    for (const step of ["begin", "fetch", "split", "publish"]) {
      assert(steps.includes(step), `build step ${step}: ${steps}`);
    }
    const finish = records().find((r) => r.event === "build.finish" && !r.unchanged);
    assert(finish && finish.packs > 0 && finish.bytes > 0, JSON.stringify(finish));

    // Shallow clones: answered by the git mirror (on by default in gitedge serve), which the
    // snapshot seeded: no update needed.
    for (const name of ["s1", "s2"]) {
      await git([
        "clone",
        "-q",
        "--bare",
        "--depth",
        "1",
        withCredentials(edge.url),
        `${dir.path}/${name}`,
      ]);
    }
    const shallow = records().filter((r) => r.event === "request" && r.mirror !== undefined);
    assertEquals(
      shallow.slice(-2).map((r) => [r.action, r.mirror, r.reason]),
      [["mirror", "hit", "client did not ask for packfile-uris"], [
        "mirror",
        "hit",
        "client did not ask for packfile-uris",
      ]],
      JSON.stringify(shallow),
    );

    // The origin goes away: the clone fails with a 502, the log says why.
    await origin[Symbol.asyncDispose]();
    originUp = false;
    const down = await fetch(`${edge.url}/r.git/info/refs?service=git-upload-pack`);
    await down.body?.cancel();
    assertEquals(down.status, 502);
    const failedWarm = await fetch(`${edge.url}/_edge/warm/r.git`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    await failedWarm.body?.cancel();
    const originErrors = records().filter((r) => r.event === "origin.error");
    assert(originErrors.some((r) => r.for === "request" && r.repo === "r.git" && r.error));
    assert(originErrors.some((r) => r.for === "build"), JSON.stringify(originErrors));
    const failed = records().find((r) => r.event === "build.fail");
    assert(failed && failed.repo === "r.git" && failed.reason, JSON.stringify(failed));
    const request502 = records().find((r) => r.event === "request" && r.status === 502);
    assertEquals(request502?.level, "warn");

    assertEquals(await edge.stop(), 0, edge.stderr());
    const everything = edge.stdout() + edge.stderr();
    const basic = btoa(`${USER}:${PASSWORD}`);
    for (const secret of [ADMIN, KEY_HEX, PASSWORD, basic]) {
      assert(!everything.includes(secret), `a secret in the log (${secret.slice(0, 4)}...)`);
    }
  } finally {
    if (originUp) await origin[Symbol.asyncDispose]();
  }
});
