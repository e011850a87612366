import { assert, assertEquals, assertThrows } from "./assert.ts";
import { withinDeadline } from "./deadline.ts";
import { tempDir } from "./git.ts";
import { DEFAULT_TEST_TIMEOUT_MS, TEST_TIMEOUT_ENV, testTimeoutMs } from "./test_deadline.ts";

const PRELOAD = new URL("./test_deadline.ts", import.meta.url).pathname;

/** A test module with hangs of every kind, in each of Deno.test's call forms. */
const HANGING_MODULE = `
const forever = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 3_600_000));
Deno.test("a timer that never fires in time", forever);
Deno.test({ name: "a hot loop", fn() { while (true) { /* spins */ } } });
Deno.test("options form: a read that never ends", { sanitizeResources: false }, async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: listener.addr.port });
  await conn.read(new Uint8Array(1));
});
Deno.test(function aNamedFunctionThatHangs() { return forever(); });
Deno.test({ name: "its own timeout wins", timeout: 120_000 }, (): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, 3_000)));
Deno.test("a quick test passes", () => {});
Deno.test.ignore({ name: "an ignored hang", fn: forever });
`;

const HUNG = [
  "a timer that never fires in time",
  "a hot loop",
  "options form: a read that never ends",
  "aNamedFunctionThatHangs",
];

Deno.test("test deadline: a hanging test fails by name and the run goes on", async () => {
  await using dir = await tempDir();
  await Deno.writeTextFile(`${dir.path}/hang_test.ts`, HANGING_MODULE);
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "--no-config", "--allow-all", "--preload", PRELOAD, "hang_test.ts"],
    cwd: dir.path,
    env: { [TEST_TIMEOUT_ENV]: "1500", NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  try {
    const { code, stdout, stderr } = await withinDeadline(child.output(), "the hanging run");
    const out = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
    assert(code !== 0, `the run fails:\n${out}`);
    for (const name of HUNG) {
      assert(out.includes(`${name} ... FAILED`), `"${name}" reported as failed:\n${out}`);
      // At its own line in the test file, not at the wrapper's.
      const line = HANGING_MODULE.split("\n").findIndex((l) => l.includes(name)) + 1;
      assert(out.includes(`${name} => ./hang_test.ts:${line}:`), `"${name}" located:\n${out}`);
    }
    assertEquals(out.match(/Test timed out after 1500ms/g)?.length, HUNG.length, out);
    assert(out.includes("its own timeout wins ... ok"), `a test's own timeout is kept:\n${out}`);
    assert(out.includes("a quick test passes ... ok"), out);
    assert(out.includes("an ignored hang ... ignored"), out);
    assert(/FAILED \| 2 passed \| 4 failed \| 1 ignored/.test(out), out);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
  }
});

Deno.test("test deadline: the default, the variable, and a bad value", () => {
  assertEquals(testTimeoutMs(undefined), DEFAULT_TEST_TIMEOUT_MS);
  assertEquals(testTimeoutMs(""), DEFAULT_TEST_TIMEOUT_MS);
  assertEquals(testTimeoutMs("2500"), 2500);
  for (const bad of ["0", "-1", "1.5", "10m", "Infinity"]) {
    assertThrows(() => testTimeoutMs(bad), RangeError, TEST_TIMEOUT_ENV);
  }
});
