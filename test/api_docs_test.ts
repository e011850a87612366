/**
 * The public API (`mod.ts`) documents itself: every export has an `@example`, as in denoland/std.
 * (`deno task check` runs with `--doc`, so the examples also type-check.)
 */
import { assert, assertEquals } from "./support/assert.ts";

interface DocSymbol {
  name: string;
  declarations: { jsDoc?: { tags?: { kind: string }[] } }[];
}

Deno.test("every export of mod.ts has an @example", async () => {
  const mod = new URL("../mod.ts", import.meta.url);
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", mod.pathname],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  assert(out.success, new TextDecoder().decode(out.stderr));
  const doc = JSON.parse(new TextDecoder().decode(out.stdout));
  const symbols: DocSymbol[] = doc.nodes[mod.href].symbols;
  assert(symbols.length > 40, `${symbols.length} exports`);
  const without = symbols.filter((s) =>
    !s.declarations.some((d) => d.jsDoc?.tags?.some((t) => t.kind === "example"))
  ).map((s) => s.name);
  assertEquals(without, []);
});
