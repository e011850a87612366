/**
 * The runtime boundary, checked on the source text:
 * - everything under `src/` except `src/client` (the clone client, a Deno program) uses web
 *   standards only: no `Deno.*`, no `node:` module, nothing from `edge/` or `src/client/`;
 * - `src/client` imports nothing from `edge/`;
 * - under `edge/`, only the command-line dispatcher (`edge/deno/cli.ts`) and the npm package
 *   (`edge/npm/`) load `src/client/`: the servers (Deno, Worker) import nothing of the client;
 * - no module under `src/` or `edge/` takes part in an import cycle (type-only imports included:
 *   a cycle of types is still two files that cannot be read apart).
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

/** The runtime-free part of `src/`: every file under it but those of `src/client`. */
async function runtimeFree(): Promise<string[]> {
  return (await sources("src")).filter((file) => !file.startsWith("src/client/"));
}

/** The files of `edge/` that may load the client: the CLI dispatcher and the npm package. */
const CLIENT_LOADERS = /^edge\/(deno\/cli\.ts$|npm\/)/;

Deno.test("src/ but src/client reaches for no runtime: no Deno.*, node:, edge/ or src/client/", async () => {
  const offences: string[] = [];
  const files = await runtimeFree();
  for (const dir of ["src/git", "src/proxy", "src/storage"]) {
    assert(files.some((f) => f.startsWith(`${dir}/`)), `${dir} is checked`);
  }
  for (const file of files) {
    const text = code(await Deno.readTextFile(root + file));
    if (/\bDeno\s*\./.test(text)) offences.push(`${file}: uses Deno.*`);
    for (const spec of specifiers(text)) {
      if (spec.startsWith("node:")) offences.push(`${file}: imports ${spec}`);
      const target = resolve(file, spec);
      if (target && !target.startsWith("src/")) offences.push(`${file}: imports ${target}`);
      if (target && target.startsWith("src/client/")) offences.push(`${file}: imports ${target}`);
    }
  }
  assertEquals(offences, []);
});

Deno.test("the client imports nothing of edge/; of edge/, only the CLI dispatcher and the npm package load the client", async () => {
  const offences: string[] = [];
  for (const file of [...await sources("src/client"), ...await sources("edge")]) {
    const text = code(await Deno.readTextFile(root + file));
    for (const spec of specifiers(text)) {
      const target = resolve(file, spec);
      if (!target) continue;
      if (file.startsWith("src/client/") && target.startsWith("edge/")) {
        offences.push(`${file}: imports ${target}`);
      }
      if (
        file.startsWith("edge/") && target.startsWith("src/client/") && !CLIENT_LOADERS.test(file)
      ) {
        offences.push(`${file}: imports ${target}`);
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

/**
 * The rooms of `src/proxy`: `app.ts` at the top composes them; every other module lives in a room.
 * Only `app.ts` enters the fetch path (`fetch/`); `core/` (repo, deps, config, context, metrics,
 * ...) names the other rooms' types but runs none of their code.
 */
Deno.test("src/proxy: rooms only; only app.ts enters fetch/; core/ runs no other room's code", async () => {
  const offences: string[] = [];
  const files = await sources("src/proxy");
  for (const file of files) {
    const [, , room, rest] = file.split("/");
    if (rest === undefined && room !== "app.ts") offences.push(`${file}: not in a room`);
    const text = code(await Deno.readTextFile(root + file));
    for (
      const match of text.matchAll(
        /^\s*(import|export)\s+(type\s+)?[^;]*?from\s*["']([^"']+)["']/gm,
      )
    ) {
      const target = resolve(file, match[3]);
      if (!target?.startsWith("src/proxy/")) continue;
      const targetRoom = target.split("/")[2];
      if (targetRoom === room) continue;
      if (targetRoom === "fetch" && file !== "src/proxy/app.ts") {
        offences.push(`${file}: enters the fetch path (${target})`);
      }
      if (room === "core" && !match[2]) offences.push(`${file}: core runs ${target}`);
    }
  }
  assertEquals(offences, []);
});
