/**
 * The mutation-testing script's own logic (.ci/mutants.ts), without running any mutant: a mutant
 * applies only where its text occurs once, the file is restored whatever the run does, and every
 * listed mutant still applies to the code as it is (a stale one would test nothing).
 */
import { MUTANTS, mutate, withMutation } from "../.ci/mutants.ts";
import { tempDir } from "./support/git.ts";
import { assert, assertEquals, assertRejects } from "./support/assert.ts";

const root = new URL("..", import.meta.url).pathname;

Deno.test("mutants: applied where the text occurs exactly once, refused otherwise", () => {
  assertEquals(mutate("a < b; c", { from: "<", to: "<=" }), "a <= b; c");
  assertEquals(mutate("a < b < c", { from: "<", to: "<=" }), null, "twice");
  assertEquals(mutate("a > b", { from: "<", to: "<=" }), null, "absent");
  assertEquals(mutate("keep; drop;", { from: " drop;", to: "" }), "keep;");
});

Deno.test("mutants: the file is restored after the run, also when it throws", async () => {
  await using dir = await tempDir();
  const file = `${dir.path}/m.ts`;
  await Deno.writeTextFile(file, "original\n");
  const seen = await withMutation(file, "mutated\n", () => Deno.readTextFile(file));
  assertEquals(seen, "mutated\n", "the run sees the mutant");
  assertEquals(await Deno.readTextFile(file), "original\n", "restored");
  await assertRejects(
    () => withMutation(file, "mutated\n", () => Promise.reject(new Error("boom"))),
    Error,
    "boom",
  );
  assertEquals(await Deno.readTextFile(file), "original\n", "restored after a failure");
});

Deno.test("mutants: every listed mutant applies to the code as it is, and names test files that exist", async () => {
  assertEquals(new Set(MUTANTS.map((m) => m.name)).size, MUTANTS.length, "unique names");
  const stale: string[] = [];
  for (const m of MUTANTS) {
    if (mutate(await Deno.readTextFile(`${root}${m.file}`), m) === null) stale.push(m.name);
    for (const t of m.tests) assert((await Deno.stat(`${root}${t}`)).isFile, `${m.name}: ${t}`);
  }
  assertEquals(stale, [], "mutants whose original text is gone: update .ci/mutants.ts");
});
