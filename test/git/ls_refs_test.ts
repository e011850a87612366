import { assert, assertEquals, assertRejects, assertThrows } from "../support/assert.ts";
import { ProtocolError } from "../../src/git/errors.ts";
import { formatLsRefsLine, parseLsRefsLine, readLsRefsAnswer } from "../../src/git/ls_refs.ts";
import { encodePkts, PktLineReader } from "../../src/git/pktline.ts";
import { chunked } from "../support/streams.ts";
import { transcripts } from "./transcripts.ts";

Deno.test("ls-refs response lines from git parse and format back", async () => {
  const t = await transcripts("lsRefsResponse", "unbornResponse");
  for (
    const [bytes, expectUnborn] of [[t.lsRefsResponse, false], [t.unbornResponse, true]] as const
  ) {
    const reader = new PktLineReader(chunked(bytes, { seed: 3 }));
    const lines: string[] = [];
    for (let p = await reader.read(); p?.type === "data"; p = await reader.read()) {
      lines.push(new TextDecoder().decode(p.data).replace(/\n$/, ""));
    }
    assert(lines.length > 0);
    const refs = lines.map(parseLsRefsLine);
    assertEquals(refs.map(formatLsRefsLine), lines);
    if (expectUnborn) {
      assertEquals(refs, [{ oid: null, name: "HEAD", symrefTarget: "refs/heads/trunk" }]);
    } else {
      assertEquals(refs[0], { oid: t.repo.main, name: "HEAD", symrefTarget: "refs/heads/main" });
      assertEquals(refs.find((r) => r.name === "refs/tags/v1"), {
        oid: t.repo.tag,
        name: "refs/tags/v1",
        peeled: t.repo.first,
      });
    }
  }
  for (const bad of ["", "abc refs/heads/x", `${"a".repeat(40)}`, `${"a".repeat(40)} x junk:1`]) {
    assertThrows(() => parseLsRefsLine(bad), ProtocolError);
  }
});

Deno.test("readLsRefsAnswer: a whole answer's refs; cut short, over its bounds or an ERR refused", async () => {
  const [a, b] = ["a".repeat(40), "b".repeat(40)];
  const lines = [
    `${a} HEAD symref-target:refs/heads/main\n`,
    `${a} refs/heads/main\n`,
    `${b} refs/tags/v1 peeled:${a}\n`,
    "unborn refs/heads/none\n",
  ];
  const body = (items: Parameters<typeof encodePkts>[0]) =>
    ReadableStream.from([encodePkts(items)]);
  assertEquals(await readLsRefsAnswer(body([...lines, "flush"]), { maxBytes: 1000 }), {
    HEAD: a,
    "refs/heads/main": a,
    "refs/tags/v1": b,
  });
  const refused = (items: Parameters<typeof encodePkts>[0], maxBytes = 1000, maxRefs?: number) =>
    assertRejects(() => readLsRefsAnswer(body(items), { maxBytes, maxRefs }), ProtocolError);
  await refused(lines, 1000);
  await refused([...lines, "flush"], 100);
  await refused([...lines, "flush"], 1000, 3);
  await refused(["ERR upload-pack: not our ref\n", "flush"]);
  await refused([lines[0], "delim", "flush"]);
});
