import { assert, assertEquals, assertRejects, assertThrows } from "../support/assert.ts";
import {
  type CommandRequest,
  isArg,
  parseCommandRequest,
  readCommandRequest,
  requestCommand,
  serializeCommandRequest,
  withoutArgLines,
} from "../../src/git/command_request.ts";
import { ProtocolError } from "../../src/git/errors.ts";
import { parseFetchArgs, serializeFetchArgs } from "../../src/git/fetch_request.ts";
import { parseLsRefsArgs, serializeLsRefsArgs } from "../../src/git/ls_refs.ts";
import { decodePkts, encodePkts, PktLineReader } from "../../src/git/pktline.ts";
import { chunked, type ChunkPlan, concatBytes } from "../support/streams.ts";
import { PLANS, transcripts } from "./transcripts.ts";

/** Reads all requests in `bytes`. */
async function readRequests(bytes: Uint8Array, plan: ChunkPlan): Promise<CommandRequest[]> {
  const reader = new PktLineReader(chunked(bytes, plan));
  const out: CommandRequest[] = [];
  for (let r = await readCommandRequest(reader); r; r = await readCommandRequest(reader)) {
    out.push(r);
  }
  return out;
}

Deno.test("requests captured from real git clones round-trip byte for byte", async () => {
  const t = await transcripts("cloneRequests", "cloneRequestsSince");
  for (const bytes of [t.cloneRequests, t.cloneRequestsSince]) {
    const reference = await readRequests(bytes, [bytes.length]);
    assertEquals(reference.map((r) => r.command), ["ls-refs", "fetch"]);
    assertEquals(concatBytes(reference.map(serializeCommandRequest)), bytes);
    for (const plan of PLANS) assertEquals(await readRequests(bytes, plan), reference);

    const [lsRefs, fetch] = reference;
    assert(lsRefs.capabilities.some((c) => c.startsWith("agent=git/")));
    assertEquals(serializeLsRefsArgs(parseLsRefsArgs(lsRefs.args)), lsRefs.args);
    assert(parseLsRefsArgs(lsRefs.args).refPrefixes.includes("refs/heads/"));
    const args = parseFetchArgs(fetch.args);
    assertEquals(serializeFetchArgs(args), fetch.args);
    assertEquals(args.wants[0], t.repo.main);
    assert(args.done && args.thinPack && args.ofsDelta && args.noProgress);
    assertEquals(args.other, []);
  }
  const depth = parseFetchArgs((await readRequests(t.cloneRequests, "bytewise"))[1].args);
  assertEquals(depth.deepen, 1);
  assertEquals(depth.filter, "blob:none");
  const since = parseFetchArgs((await readRequests(t.cloneRequestsSince, "bytewise"))[1].args);
  // approxidate keeps the current time of day: 2000-01-01 plus up to a day.
  const offset = since.deepenSince! - 946684800;
  assert(offset >= -86400 && offset <= 86400, `deepen-since ${since.deepenSince}`);
  assertEquals(since.deepenNot, ["v1"]);
});

Deno.test("command requests: delimiter and newlines like git, malformed requests rejected", async () => {
  const req = { command: "fetch", capabilities: ["agent=a"], args: ["want x", "done"] };
  assertEquals(
    new TextDecoder().decode(serializeCommandRequest(req)),
    "0011command=fetch000bagent=a0001000bwant x\n0009done\n0000",
  );
  assertEquals(
    new TextDecoder().decode(
      serializeCommandRequest({ command: "ls-refs", capabilities: [], args: [] }),
    ),
    "0014command=ls-refs\n00010000",
  );
  assertEquals(parseCommandRequest(serializeCommandRequest(req)), req);
  const noArgs = { command: "custom", capabilities: ["k=v"], args: [] };
  assertEquals(parseCommandRequest(serializeCommandRequest(noArgs)), noArgs);
  assertEquals(await readCommandRequest(new PktLineReader(chunked(new Uint8Array(0), [1]))), null);
  const bad: Uint8Array[] = [
    encodePkts(["agent=x", "flush"]),
    encodePkts(["command=", "flush"]),
    encodePkts(["flush"]),
    encodePkts(["command=fetch", "delim", "a", "delim", "flush"]),
    encodePkts(["command=fetch", "delim", "want"]),
    encodePkts(["command=fetch", "response-end"]),
    encodePkts(["command=fetch", "delim", "want x\n", "command=ls-refs\n", "flush"]),
  ];
  for (const b of bad) {
    const err = assertThrows(() => parseCommandRequest(b), ProtocolError);
    assertEquals(err.code, "bad-request");
    const viaReader = await assertRejects(
      () => readCommandRequest(new PktLineReader(chunked(b, "bytewise"))),
      ProtocolError,
    );
    assertEquals(viaReader.code, "bad-request");
  }
});

Deno.test("command requests: capability lines may come before command= (git >= 2.40)", () => {
  // git 2.55 sends bundle-uri this way; gitprotocol-v2 puts no order on these lines.
  const bytes = encodePkts([
    "agent=git/2.55.0",
    "object-format=sha1",
    "command=bundle-uri\n",
    "delim",
    "flush",
  ]);
  const req = parseCommandRequest(bytes);
  assertEquals(req, {
    command: "bundle-uri",
    capabilities: ["agent=git/2.55.0", "object-format=sha1"],
    args: [],
    commandAt: 2,
  });
  const fetch = encodePkts([
    "agent=a",
    "command=fetch",
    "object-format=sha1",
    "delim",
    "done\n",
    "flush",
  ]);
  const parsed = parseCommandRequest(fetch);
  assertEquals([parsed.command, parsed.capabilities, parsed.args], [
    "fetch",
    ["agent=a", "object-format=sha1"],
    ["done"],
  ]);
  assertEquals(serializeCommandRequest(parsed), fetch, "the command line stays where it was");
  assertEquals(requestCommand(decodePkts(fetch).slice(0, 3)), { command: "fetch", at: 1 });
  for (
    const b of [
      encodePkts(["agent=a", "command=fetch", "command=ls-refs", "delim", "flush"]),
      encodePkts(["agent=a", "delim", "command=fetch", "flush"]),
    ]
  ) {
    assertEquals(assertThrows(() => parseCommandRequest(b), ProtocolError).code, "bad-request");
  }
});

Deno.test("an argument is its keyword alone or with a value; others that start alike are kept", () => {
  assert(isArg("packfile-uris https", "packfile-uris") && isArg("packfile-uris", "packfile-uris"));
  assert(!isArg("packfile-uris-v2 x", "packfile-uris"));
  assertEquals(
    withoutArgLines(["want a", "packfile-uris https", "packfile-urisx", "done"], "packfile-uris"),
    ["want a", "packfile-urisx", "done"],
  );
});
