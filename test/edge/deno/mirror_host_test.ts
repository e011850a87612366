/**
 * The git side of the mirror (edge/deno/mirror.ts) on its own: how a caller's credential reaches
 * git, and that it goes nowhere but the origin.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { GitMirrorHost } from "../../../edge/deno/mirror.ts";

Deno.test("mirror host: an origin redirecting the update elsewhere: not followed, the credential goes nowhere else", async () => {
  await using dir = await tempDir();
  const seen: (string | null)[] = [];
  const elsewhere = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    seen.push(req.headers.get("authorization"));
    return new Response("no", { status: 404 });
  });
  const target = `http://127.0.0.1:${elsewhere.addr.port}`;
  const origin = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const url = new URL(req.url);
    return new Response(null, {
      status: 302,
      headers: { location: `${target}${url.pathname}${url.search}` },
    });
  });
  try {
    const host = new GitMirrorHost({ dir: dir.path, store: null as never });
    const repo = {
      id: "ab",
      path: "r.git",
      originUrl: `http://127.0.0.1:${origin.addr.port}/r.git`,
    };
    await git(["init", "-q", "--bare", `${dir.path}/ab.git`]);
    let failed = false;
    await host.update(repo, { headers: { authorization: "Basic c2VjcmV0" } }, []).catch(() => {
      failed = true;
    });
    assert(failed, "the update failed (the redirect was not followed)");
    // Not followed at all (curl would drop the header for another host:port; this is the
    // edge's own guarantee, whatever the curl).
    assertEquals(seen, []);
  } finally {
    await origin.shutdown();
    await elsewhere.shutdown();
  }
});
