/**
 * 100,000 seeded inputs through the edge's real HTTP handler (see `fuzz_http.ts` for what is
 * allowed per input). Longer runs: `bench/fuzz_http.ts --inputs N --seed S`.
 */
import { formatHistogram, runFuzz, startFuzzWorld } from "./fuzz_http.ts";
import { withinDeadline } from "../support/deadline.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { encodePkts } from "../../src/git/pktline.ts";

Deno.test("fuzz: 100,000 mutated requests through app.fetch: no crash, hang, 5xx or leak", async () => {
  await using world = await startFuzzWorld();
  const report = await withinDeadline(
    runFuzz(world, { inputs: 100_000, seed: 1, perInputMs: 30_000 }),
    "the fuzz loop",
    600_000,
  );
  const failures = report.failures.map((f) => `seed ${f.seed} (${f.kind}): ${f.what}`);
  const histogram = formatHistogram(report.histogram);
  assert(
    failures.length === 0,
    `${failures.length} failing:\n${failures.join("\n")}\n${histogram}`,
  );
  // Both sides were exercised: inputs refused while parsing, and some that reached the origin.
  assert((report.histogram.get("400") ?? 0) > 50_000, histogram);
  assert(report.originCalls > 0, "some inputs reached the origin");
});

/** A protocol-v2 `git-upload-pack` POST of `body` to the fuzz world's repository. */
function uploadPackRequest(body: Uint8Array): Request {
  return new Request("http://edge.test/r.git/git-upload-pack", {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
    },
    body: body as Uint8Array<ArrayBuffer>,
  });
}

// Found by the fuzz (seed 1000424 of its first version): a fetch with `include-tag` makes the edge
// ask the origin for its tags first; an origin that cut that answer short (its upload-pack dies
// on an object format it does not know) made the edge answer 500 with "internal error".
Deno.test("fuzz regression: a tag listing the origin cuts short is a 502, not a 500", async () => {
  await using world = await startFuzzWorld();
  const body = encodePkts([
    "command=fetch\n",
    "object-format=sha?\n",
    "delim",
    `want ${world.corpus.oids[0]}\n`,
    "include-tag\n",
    "done\n",
    "flush",
  ]);
  const res = await world.app.fetch(uploadPackRequest(body));
  const text = await res.text();
  assertEquals(res.status, 502, text);
  assert(text.includes("cut short"), text);
  assert(!text.includes(world.secrets[2]), text);
});

// Found by the fuzz: a fetch with a `command=` line among its arguments, or with packets after
// its final flush, went to the origin; git's upload-pack died on the first (the client saw an
// answer cut short) and never read the second. The edge answers 400 itself.
Deno.test("fuzz regression: a fetch naming a second command or going on after its flush is a 400 from the edge", async () => {
  await using world = await startFuzzWorld();
  const want = `want ${world.corpus.oids[0]}\n`;
  const cases: [string, (string | "delim" | "flush")[], RegExp][] = [
    [
      "command line among the arguments",
      ["command=fetch\n", "delim", want, "command=ls-refs\n", "done\n", "flush"],
      /second command \("command=ls-refs"\) among its arguments/,
    ],
    [
      "arguments after an early flush",
      ["command=fetch\n", "flush", "delim", want, "done\n", "flush"],
      /goes on after its final flush/,
    ],
    [
      "packets after the request's flush",
      ["command=fetch\n", "delim", want, "flush", "done\n", "flush"],
      /goes on after its final flush/,
    ],
  ];
  for (const [name, pkts, message] of cases) {
    const before = world.originCalls();
    const res = await world.app.fetch(uploadPackRequest(encodePkts(pkts)));
    const text = await res.text();
    assertEquals(res.status, 400, `${name}: ${text}`);
    assert(message.test(text), `${name}: ${text}`);
    assertEquals(world.originCalls(), before, `${name}: the origin was not asked`);
  }
});
