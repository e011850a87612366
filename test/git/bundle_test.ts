import { encodeBundleHeader, joinedPack, joinedPackSize } from "../../src/git/bundle.ts";
import { assertEquals, assertThrows } from "../support/assert.ts";

const A = "a".repeat(40);
const B = "b".repeat(40);

Deno.test("bundle headers: v2 for SHA-1, v3 with its object format for SHA-256", () => {
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  assertEquals(
    text(encodeBundleHeader({
      objectFormat: "sha1",
      prerequisites: [A, A],
      refs: { "refs/heads/main": B },
    })),
    `# v2 git bundle\n-${A}\n${B} refs/heads/main\n\n`,
  );
  const C = "c".repeat(64);
  assertEquals(
    text(encodeBundleHeader({ objectFormat: "sha256", prerequisites: [], refs: { "refs/x": C } })),
    `# v3 git bundle\n@object-format=sha256\n${C} refs/x\n\n`,
  );
  const bad: Record<string, string>[] = [
    { "refs/a\nb": A },
    { "HEAD": A },
    { "refs/a b": A },
    { "refs/a": "x" },
  ];
  for (const refs of bad) {
    assertThrows(() => encodeBundleHeader({ objectFormat: "sha1", prerequisites: [], refs }));
  }
  assertThrows(() =>
    encodeBundleHeader({ objectFormat: "sha256", prerequisites: [A], refs: { "refs/a": A } })
  );
});

Deno.test("a joined pack refuses a part shorter than it said", async () => {
  const part = (bytes: number[], size: number) => ({
    size,
    objects: 1,
    open: () => Promise.resolve(new Blob([new Uint8Array(bytes)]).stream()),
  });
  assertEquals(joinedPackSize([{ size: 40 }, { size: 50 }], "sha1"), 12 + 8 + 18 + 20);
  const short = joinedPack([part(new Array(30).fill(0), 40)], "sha1");
  let failed = false;
  try {
    for await (const _ of short) { /* drain */ }
  } catch {
    failed = true;
  }
  assertEquals(failed, true, "a short part errors the stream");
});
