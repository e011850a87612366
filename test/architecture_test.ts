/**
 * The runtime boundary, checked on the source text: `src/git`, `src/proxy` and `src/storage` use
 * web standards only (no `Deno.*`, no `node:` module, nothing from `edge/`), and no module under
 * `src/` or `edge/` takes part in an import cycle (type-only imports included: a cycle of types is
 * still two files that cannot be read apart).
 */
import { assert, assertEquals } from "./support/assert.ts";

const root = new URL("..", import.meta.url).pathname;

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(root + dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) out.push(...await sources(path));
    else if (entry.name.endsWith(".ts")) out.push(path);
  }
  return out.sort();
}

/** Strips comments so that prose about `Deno.serve` or `edge/` does not count. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["']([^"']+)["']/gm;

export function specifiers(text: string): string[] {
  return [...code(text).matchAll(SPECIFIER)].map((m) => m[1]);
}

function resolve(from: string, spec: string): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const parts = from.split("/").slice(0, -1);
  for (const piece of spec.split("/")) {
    if (piece === "..") parts.pop();
    else if (piece !== ".") parts.push(piece);
  }
  return parts.join("/");
}

const RUNTIME_FREE = ["src/git", "src/proxy", "src/storage"];

Deno.test("src/git, src/proxy and src/storage reach for no runtime: no Deno.*, node: or edge/", async () => {
  const offences: string[] = [];
  for (const dir of RUNTIME_FREE) {
    for (const file of await sources(dir)) {
      const text = code(await Deno.readTextFile(root + file));
      if (/\bDeno\s*\./.test(text)) offences.push(`${file}: uses Deno.*`);
      for (const spec of specifiers(text)) {
        if (spec.startsWith("node:")) offences.push(`${file}: imports ${spec}`);
        const target = resolve(file, spec);
        if (target && !target.startsWith("src/")) offences.push(`${file}: imports ${target}`);
        if (target && target.startsWith("src/client/")) offences.push(`${file}: imports ${target}`);
      }
    }
  }
  assertEquals(offences, []);
});

/** Every cycle's members, found by Tarjan's strongly connected components. */
export function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) === index.get(node)) {
      const members: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        members.push(member);
      } while (member !== node);
      if (members.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(members.sort());
    }
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return found;
}

Deno.test("cycles() finds a two-file cycle and passes a chain", () => {
  assertEquals(cycles(new Map([["a", ["b"]], ["b", ["a"]], ["c", ["a"]]])), [["a", "b"]]);
  assertEquals(cycles(new Map([["a", ["b"]], ["b", ["c"]], ["c", []]])), []);
  assert(specifiers('import type { X } from "./x.ts";\n// import "./y.ts"').includes("./x.ts"));
});

Deno.test("no import cycle under src/ and edge/", async () => {
  const graph = new Map<string, string[]>();
  for (const file of [...await sources("src"), ...await sources("edge")]) {
    const text = await Deno.readTextFile(root + file);
    const targets = specifiers(text).map((s) => resolve(file, s)).filter((t): t is string =>
      t !== undefined
    );
    graph.set(file, targets);
  }
  assertEquals(cycles(graph), []);
});
