/**
 * The test task (`deno task test [paths and flags]`, test/ by default): `deno test` with the
 * sanitizers and the per-test deadline (test/support/test_deadline.ts), then the list of suites
 * this machine skipped and why (test/support/skips.ts). Under CI (`CI=true`) a skipped suite fails
 * the run: CI must provide every prerequisite. The exit status is deno test's otherwise.
 */
import { formatSkips, readSkips, SKIP_LOG_ENV } from "../test/support/skips.ts";

const TEST_FLAGS = [
  "test",
  "--allow-all",
  "--parallel",
  "--sanitize-ops",
  "--sanitize-resources",
  "--preload",
  "test/support/test_deadline.ts",
];

const log = await Deno.makeTempFile({ prefix: "gitedge-skips-", suffix: ".jsonl" });
let code = 1;
try {
  const child = new Deno.Command(Deno.execPath(), {
    args: [...TEST_FLAGS, ...(Deno.args.length > 0 ? Deno.args : ["test/"])],
    env: { [SKIP_LOG_ENV]: log },
    stdin: "inherit",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
  // A stop asked of the task (a CI timeout, Ctrl-C) reaches the tests too.
  const forward = (signal: Deno.Signal) => () => {
    try {
      child.kill(signal);
    } catch { /* already exited */ }
  };
  const handlers = (["SIGINT", "SIGTERM"] as const).map((s) => [s, forward(s)] as const);
  for (const [signal, handler] of handlers) Deno.addSignalListener(signal, handler);
  code = (await child.status).code;
  for (const [signal, handler] of handlers) Deno.removeSignalListener(signal, handler);

  const skips = readSkips(log);
  if (skips.length > 0) {
    console.log(`\n${formatSkips(skips)}`);
    if (Deno.env.get("CI") === "true") {
      console.log(
        "CI=true: CI must run every suite; provide the prerequisites above " +
          "(.ci/run installs python3-dulwich, python3-pygit2 and jgit-cli and builds the current git)",
      );
      code ||= 1;
    }
  }
} finally {
  await Deno.remove(log);
}
Deno.exit(code);
