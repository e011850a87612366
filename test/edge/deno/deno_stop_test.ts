/** Stopping the Deno server waits for the snapshot builds that requests started. */
import { assert, assertEquals } from "../../support/assert.ts";
import { encodePkts } from "../../../src/git/pktline.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { makeRepo } from "../../support/fixtures.ts";
import { tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { startRelay } from "../../support/relay.ts";
import { repoId } from "../../../src/proxy/core/repo.ts";

Deno.test("stop() returns only after the background build a clone started has finished", async () => {
  await using origin = await startOrigin();
  const repo = await makeRepo(origin, "r.git", { commits: 6, binaryBytes: 400_000 });
  // The origin is slow (1 MB/s per response), so the build outlasts the request that starts it.
  await using slow = await startRelay(origin.url, { bytesPerSecond: 1_000_000 });
  await using dir = await tempDir();
  const errors: unknown[] = [];
  const edge = await startDenoEdge({
    store: dir.path,
    config: { origin: slow.url, chunks: 2 },
    onBuildError: (_, err) => errors.push(err),
  });
  try {
    // A clone-style fetch asking for URIs, with no snapshot yet: passes through and schedules a
    // build. The client walks away without reading the answer.
    const res = await fetch(`${edge.url}/r.git/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
      },
      body: encodePkts([
        "command=fetch\n",
        "delim",
        `want ${repo.refs["refs/heads/main"]}\n`,
        "packfile-uris http\n",
        "done\n",
        "flush",
      ]) as Uint8Array<ArrayBuffer>,
    });
    assertEquals(res.status, 200);
    await res.body?.cancel();
  } finally {
    await edge.stop();
  }
  // Nothing runs any more, and the build's result is in the store.
  const originUrl = `${slow.url}/r.git`;
  const id = repoId(originUrl);
  const st = await edge.coordinator.status({ id, originUrl, path: "r.git" });
  assertEquals(errors, [], "the build did not fail");
  assertEquals(st.state, "ready", "the build finished before stop() returned");
  assertEquals(st.builds, 1);
  assert((await Deno.stat(`${dir.path}/repos/${id}/manifest.json`)).isFile, "manifest published");
});
