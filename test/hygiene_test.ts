/**
 * The repository stays clean: every TypeScript file type-checks (benches and entries too, which
 * no test imports), `deno lint` and `deno fmt --check` pass, and what tools write into the checkout
 * is ignored by git and by deno alike.
 */
const root = new URL("..", import.meta.url).pathname;

interface DenoConfig {
  tasks: Record<string, string>;
  exclude: string[];
}
const config: DenoConfig = JSON.parse(await Deno.readTextFile(`${root}deno.json`));

/**
 * Directories that runs write into the checkout: dependencies, the default store of
 * `deno task start`, bench results, and `wrangler dev`'s bundles and local state.
 */
const GENERATED = ["node_modules", ".gitedge-store", "bench/out", ".wrangler"];

async function deno(args: string[]): Promise<{ ok: boolean; output: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: root,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { ok: out.success, output: text.split("\n").slice(-30).join("\n") };
}

/** The arguments of a deno.json task that runs one `deno` command (e.g. `check`'s path list). */
function taskArgs(task: string | undefined, command: string): string[] {
  const words = (task ?? "").trim().split(/\s+/);
  if (words[0] !== "deno" || words[1] !== command || words.some((w) => /[;&|<>$`'"]/.test(w))) {
    throw new Error(`expected the task to be one plain 'deno ${command} …' command: ${task}`);
  }
  return words.slice(1);
}

for (
  const [name, args] of [
    // The check task's own path list, so the test and `deno task check` cannot drift apart.
    ["deno task check", taskArgs(config.tasks.check, "check")],
    ["deno lint", ["lint"]],
    ["deno fmt --check", ["fmt", "--check"]],
  ] as const
) {
  Deno.test(`${name} (${args.join(" ")})`, async () => {
    const { ok, output } = await deno([...args]);
    if (!ok) throw new Error(`${name} failed:\n${output}`);
  });
}

Deno.test("generated directories are ignored by git and excluded from deno's fmt, lint and check", async () => {
  const ignored = (await Deno.readTextFile(`${root}.gitignore`)).split("\n")
    .map((line) => line.trim().replace(/^\//, "").replace(/\/$/, ""));
  const missing = GENERATED.flatMap((dir) => [
    ...(ignored.includes(dir) ? [] : [`.gitignore lacks ${dir}/`]),
    ...(config.exclude.map((e) => e.replace(/\/$/, "")).includes(dir)
      ? []
      : [`deno.json's exclude lacks ${dir}`]),
  ]);
  if (missing.length > 0) throw new Error(missing.join("\n"));
});

Deno.test("taskArgs takes one plain deno command and nothing else", () => {
  const equal = (a: string[], b: string[]) => JSON.stringify(a) === JSON.stringify(b);
  if (!equal(taskArgs("deno check src/ test/", "check"), ["check", "src/", "test/"])) {
    throw new Error("plain task not parsed");
  }
  for (const bad of [undefined, "deno lint", "deno check a && rm -rf b", "npx deno check a"]) {
    let threw = false;
    try {
      taskArgs(bad, "check");
    } catch {
      threw = true;
    }
    if (!threw) throw new Error(`accepted ${bad}`);
  }
});
