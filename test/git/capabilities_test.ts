import { assert, assertEquals, assertRejects, assertThrows } from "../support/assert.ts";
import {
  hasFetchFeature,
  parseCapabilityAdvertisement,
  readCapabilityAdvertisement,
  serializeCapabilityAdvertisement,
  withFetchFeature,
} from "../../src/git/capabilities.ts";
import { GitFormatError, ProtocolError, ProtocolRemoteError } from "../../src/git/errors.ts";
import { encodePkts, PktLineReader } from "../../src/git/pktline.ts";
import { chunked, concatBytes, utf8 } from "../support/streams.ts";
import { PLANS, transcripts } from "./transcripts.ts";

Deno.test("capability advertisement from git round-trips and gains fetch features", async () => {
  const t = await transcripts("advertisement");
  for (const plan of PLANS) {
    const adv = await readCapabilityAdvertisement(
      new PktLineReader(chunked(t.advertisement, plan)),
    );
    assertEquals(serializeCapabilityAdvertisement(adv), t.advertisement);
  }
  const adv = await parseCapabilityAdvertisement(t.advertisement);
  assert(adv.capabilities.some((c) => c.key === "agent" && c.value?.startsWith("git/")));
  assertEquals(
    adv.capabilities.find((c) => c.key === "fetch")?.value,
    "shallow wait-for-done filter",
  );
  assert(!hasFetchFeature(adv, "packfile-uris"));
  const added = withFetchFeature(adv, "packfile-uris");
  assert(hasFetchFeature(added, "packfile-uris"));
  assert(!hasFetchFeature(adv, "packfile-uris"), "the input is not modified");
  assertEquals(withFetchFeature(added, "packfile-uris"), added);
  const text = new TextDecoder().decode(serializeCapabilityAdvertisement(added));
  assert(text.includes("fetch=shallow wait-for-done filter packfile-uris\n"), text);

  const bare = { capabilities: [{ key: "version-less" }, { key: "fetch" }] };
  assertEquals(withFetchFeature(bare, "x").capabilities[1], { key: "fetch", value: "x" });
  const noFetch = { capabilities: [{ key: "ls-refs", value: "unborn" }] };
  assertEquals(withFetchFeature(noFetch, "x"), noFetch);
  assert(!hasFetchFeature(noFetch, "x"));
});

Deno.test("advertisement parsing skips a service header and rejects other versions", async () => {
  const t = await transcripts("advertisement");
  const withService = concatBytes([
    encodePkts(["# service=git-upload-pack\n", "flush"]),
    t.advertisement,
  ]);
  assertEquals(
    parseCapabilityAdvertisement(withService),
    parseCapabilityAdvertisement(t.advertisement),
  );
  const viaReader = await readCapabilityAdvertisement(
    new PktLineReader(chunked(withService, "bytewise")),
  );
  assertEquals(viaReader, parseCapabilityAdvertisement(t.advertisement));
  const v1 = encodePkts(["version 1\n", "flush"]);
  const err = assertThrows(() => parseCapabilityAdvertisement(v1), ProtocolError, "version 2");
  assertEquals(err.code, "bad-advertisement");
  const bad = [
    encodePkts(["version 2\n", "a\n"]),
    encodePkts(["version 2\n", "a\n", "flush", "flush"]),
    encodePkts(["version 2\n", "delim", "flush"]),
    encodePkts(["# service=git-upload-pack\n", "version 2\n", "flush"]),
  ];
  for (const b of bad) {
    assertEquals(
      assertThrows(() => parseCapabilityAdvertisement(b), ProtocolError).code,
      "bad-advertisement",
    );
  }
  await assertRejects(
    () => readCapabilityAdvertisement(new PktLineReader(chunked(bad[0], [3]))),
    ProtocolError,
    "before its flush",
  );
  assertEquals(
    assertThrows(() => parseCapabilityAdvertisement(utf8("000eversion 2\n00")), GitFormatError)
      .code,
    "truncated",
  );
  assertEquals(
    assertThrows(
      () => parseCapabilityAdvertisement(encodePkts(["ERR nope\n"])),
      ProtocolRemoteError,
    )
      .remoteMessage,
    "nope",
  );
});
