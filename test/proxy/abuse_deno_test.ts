/** Hostile traffic and faults against the Deno server (`abuse_suite.ts` plus filesystem cases). */
import { abuseSuite, assertNoServerPath } from "./abuse_suite.ts";
import { denoEdgeFactory } from "../support/edge.ts";
import { startDenoEdge } from "../../edge/deno.ts";
import { parseServeArgs, UsageError } from "../../src/proxy/serve_cli.ts";
import { startOrigin } from "../support/origin.ts";
import { makeRepo } from "../support/fixtures.ts";
import { repoId } from "../../src/proxy/repo.ts";
import { assert, assertEquals, assertThrows } from "../support/assert.ts";

abuseSuite(denoEdgeFactory, "deno");

Deno.test("[deno] an origin URL with credentials is refused, and the refusal does not repeat them", async () => {
  for (const flag of ["--origin", "--public-url"]) {
    const args = [flag, "http://alice:s3cret@git.example/base"];
    if (flag === "--public-url") args.push("--origin", "http://git.example");
    const e = assertThrows(() => parseServeArgs(args, () => undefined), UsageError);
    assert(/without credentials/.test(e.message), e.message);
    assert(!e.message.includes("s3cret") && !e.message.includes("alice"), e.message);
  }
  const store = await Deno.makeTempDir();
  try {
    const started = await startDenoEdge({
      store,
      config: { origin: "http://alice:s3cret@127.0.0.1:9" },
    }).then((edge) => edge.stop().then(() => "started"), (e: Error) => e.message);
    assert(/without credentials/.test(started), started);
    assert(!started.includes("s3cret"), started);
  } finally {
    await Deno.remove(store, { recursive: true });
  }
});

Deno.test({
  name: "[deno] a failed build's lastError and a 500 body name no server path",
  fn: async () => {
    await using origin = await startOrigin();
    await makeRepo(origin, "r.git", { commits: 3 });
    const store = await Deno.makeTempDir({ prefix: "gitedge-store-" });
    const edge = await startDenoEdge({
      store,
      config: { origin: origin.url, chunks: 2 },
    });
    try {
      // The repository's pack directory cannot be created: a file is in the way.
      const repoDir = `${store}/repos/${repoId(`${origin.url}/r.git`)}`;
      await Deno.mkdir(repoDir, { recursive: true });
      await Deno.writeTextFile(`${repoDir}/packs`, "in the way");
      const warm = await fetch(`${edge.url}/_edge/warm/r.git`, { method: "POST" });
      const body = await warm.text();
      assertEquals(warm.status, 500, `warm fails: ${body}`);
      assertNoServerPath(body, "500 body");
      assert(!body.includes(store), body);
      const st = await (await fetch(`${edge.url}/_edge/status/r.git`)).json();
      assert(typeof st.snapshot.lastError === "string", JSON.stringify(st));
      assertNoServerPath(st.snapshot.lastError, "lastError");
      assert(!st.snapshot.lastError.includes(store), st.snapshot.lastError);
    } finally {
      await edge.stop();
      await Deno.remove(store, { recursive: true });
    }
  },
});
