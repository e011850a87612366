/**
 * The repository stays clean: every TypeScript file type-checks (benches and entries too, which
 * no test imports), `deno lint` and `deno fmt --check` pass.
 */
const root = new URL("..", import.meta.url).pathname;

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

for (
  const [name, args] of [
    ["deno check (src, edge, bench, mod.ts)", ["check", "src/", "edge/", "bench/", "mod.ts"]],
    ["deno lint", ["lint"]],
    ["deno fmt --check", ["fmt", "--check"]],
  ] as const
) {
  Deno.test(name, async () => {
    const { ok, output } = await deno([...args]);
    if (!ok) throw new Error(`${name} failed:\n${output}`);
  });
}
