/**
 * `edge/deno/cli.ts`, the `gitedge` entry: what `deno run` loads before a command starts. A
 * literal `import()` is part of the module graph `deno run` builds up front, so the entry's own
 * graph must not reach the server stack, and `gitedge clone`'s module must not reach it either.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { COMMAND_MODULES } from "../../../edge/deno/cli.ts";

interface InfoModule {
  specifier: string;
  dependencies?: { code?: { specifier: string }; isDynamic?: boolean }[];
}

/**
 * Every module `deno run` would load for `root` before running it (code imports, not types); with
 * `evaluated`, only those a static import evaluates (not literal `import()`s, loaded but not run).
 */
async function codeGraph(root: string, evaluated = false): Promise<string[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", root],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as { modules: InfoModule[] };
  const bySpecifier = new Map(info.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const visit = (specifier: string) => {
    if (seen.has(specifier)) return;
    seen.add(specifier);
    for (const dep of bySpecifier.get(specifier)?.dependencies ?? []) {
      if (dep.code && !(evaluated && dep.isDynamic)) visit(dep.code.specifier);
    }
  };
  visit(new URL(root).href);
  return [...seen].sort();
}

const here = (path: string) => new URL(`../../../${path}`, import.meta.url).href;
const serverSide = (s: string) =>
  s.startsWith("npm:") || s.includes("/src/proxy/") || s.includes("/node_modules/") ||
  s.includes("/edge/deno/serve") || s.includes("/edge/deno/server");

Deno.test("gitedge's entry loads no command's module before it runs; clone's loads no server module and runs no node: module", async () => {
  assertEquals(await codeGraph(here("edge/deno/cli.ts")), [here("edge/deno/cli.ts")]);
  const clone = await codeGraph(COMMAND_MODULES.clone);
  assert(clone.length > 1, "clone's module graph was read");
  assertEquals(clone.filter(serverSide), []);
  // node:crypto alone costs ~25 ms of CPU at start: only an opt-in path may import it, lazily.
  const evaluated = await codeGraph(COMMAND_MODULES.clone, true);
  assertEquals(evaluated.filter((s) => s.startsWith("node:")), []);
});

Deno.test("each command's module exists and exports its main", async () => {
  assertEquals(typeof (await import(COMMAND_MODULES.clone)).cloneMain, "function");
  assertEquals(typeof (await import(COMMAND_MODULES.serve)).serveMain, "function");
});
