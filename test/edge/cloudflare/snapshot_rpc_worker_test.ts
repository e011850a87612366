/**
 * Failures in the repository's Durable Object cross RPC as the errors the app answers for: an
 * origin that refuses or cannot be reached during a warm is the edge's 502 naming the origin's
 * answer (not its address), as on Deno (an error thrown across RPC would arrive classless, and be a 500).
 */
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";
import { MINIFLARE_LEAKS, startWorkerEdge } from "../../support/worker_harness.ts";

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test({
  name: "[worker] an origin failure inside the Durable Object is the edge's 502",
  ...MINIFLARE_LEAKS,
}, async () => {
  // An origin that answers everything with 503, then none at all. With an admin token, warm asks
  // the origin nothing before the build (which runs in the Durable Object).
  const origin = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => new Response("down for maintenance\n", { status: 503 }),
  );
  const originUrl = `http://127.0.0.1:${origin.addr.port}`;
  await using worker = await startWorkerEdge({ config: { origin: originUrl, adminToken: "t0k" } });
  const warm = async () => {
    const res = await fetch(`${worker.url}/_edge/warm/r.git`, {
      method: "POST",
      headers: { authorization: "Bearer t0k" },
    });
    return { status: res.status, text: await res.text() };
  };

  const refused = await warm();
  assertEquals(refused.status, 502, refused.text);
  assertMatch(refused.text, /^gitedge: origin answered 503 to info\/refs: down for maintenance/);

  await origin.shutdown();
  const gone = await warm();
  assertEquals(gone.status, 502, gone.text);
  assertMatch(gone.text, /^gitedge: origin unreachable \(info\/refs\): /);
  // The origin's address stays in the edge's log, out of the answer.
  for (const text of [refused.text, gone.text]) assert(!text.includes("127.0.0.1"), text);
});
