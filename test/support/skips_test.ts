import { assert, assertEquals } from "./assert.ts";
import { withinDeadline } from "./deadline.ts";
import { tempDir } from "./git.ts";
import { formatSkips, readSkips, skipped } from "./skips.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const SKIPS = new URL("./skips.ts", import.meta.url).href;

Deno.test("skips: recorded once each, in order, and listed with their reasons", async () => {
  await using dir = await tempDir();
  const log = `${dir.path}/skips.jsonl`;
  await Deno.writeTextFile(log, "");
  const printed: string[] = [];
  const sinks = { log, warn: (line: string) => printed.push(line) };
  skipped("other clients: JGit", "jgit does not run here", sinks);
  skipped("current git (2.55)", "no current git", sinks);
  skipped("other clients: JGit", "jgit does not run here", sinks); // another module says it again
  assertEquals(printed[1], "SKIPPED current git (2.55): no current git", "a line at once, too");
  const skips = readSkips(log);
  assertEquals(skips, [
    { suite: "other clients: JGit", reason: "jgit does not run here" },
    { suite: "current git (2.55)", reason: "no current git" },
  ]);
  assertEquals(
    formatSkips(skips),
    "2 suite(s) skipped on this machine (the run is smaller):\n" +
      "  - other clients: JGit: jgit does not run here\n" +
      "  - current git (2.55): no current git",
  );
  assertEquals(formatSkips([]), "");
});

Deno.test("skips: the test task lists them at the end, and fails on them under CI=true", async () => {
  await using dir = await tempDir();
  await Deno.writeTextFile(
    `${dir.path}/probe_test.ts`,
    `import { skipped } from ${JSON.stringify(SKIPS)};
skipped("probe suite", "its client is not installed");
Deno.test("the rest runs", () => {});
`,
  );
  for (const ci of ["false", "true"]) {
    const { code, stdout, stderr } = await withinDeadline(
      new Deno.Command(Deno.execPath(), {
        args: ["run", "--allow-all", ".ci/test.ts", `${dir.path}/probe_test.ts`],
        cwd: ROOT,
        env: { CI: ci, NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output(),
      `the test task with CI=${ci}`,
    );
    const out = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
    assert(out.includes("ok | 1 passed | 0 failed"), `the tests ran:\n${out}`);
    const summary = "1 suite(s) skipped on this machine (the run is smaller):\n" +
      "  - probe suite: its client is not installed";
    assert(out.trimEnd().includes(summary), `listed at the end:\n${out}`);
    if (ci === "true") {
      assertEquals(code, 1, `CI=true fails the run:\n${out}`);
      assert(out.includes("CI=true: CI must run every suite"), out);
    } else {
      assertEquals(code, 0, `a skip alone does not fail the run:\n${out}`);
    }
  }
});
