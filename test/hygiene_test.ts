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

/** The documents a user reads: README.md and every Markdown file under docs/. */
async function userDocs(): Promise<{ path: string; text: string }[]> {
  const docs = [{ path: "README.md", text: await Deno.readTextFile(`${root}README.md`) }];
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(`${root}${dir}`)) {
      if (e.isDirectory) await walk(`${dir}/${e.name}`);
      else if (e.name.endsWith(".md")) {
        docs.push({
          path: `${dir}/${e.name}`,
          text: await Deno.readTextFile(`${root}${dir}/${e.name}`),
        });
      }
    }
  };
  await walk("docs");
  return docs.sort((a, b) => a.path.localeCompare(b.path));
}

/** The most lines README.md may have: a front page, the rest lives in docs/. */
export const README_MAX_LINES = 200;

/**
 * What narrates history, which belongs in git's log and bench/RESULTS.md, not in the docs: a
 * commit hash (7 to 40 hex digits with a digit and a letter, or any hex word in backticks or after
 * "commit"), a machine's load, a session.
 */
const HISTORY: readonly [string, RegExp][] = [
  ["a commit hash", /\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b/],
  ["a commit hash", /`[0-9a-f]{7,40}`/],
  ["a commit hash", /\bcommit\s+[0-9a-f]{7,40}\b/i],
  ["a machine's load", /\bload\s+(average|[≈~]?\s*\d)/i],
  ["a session", /\b(this|last|previous|earlier)\s+session\b/i],
];

/** Each line of `text` that narrates history, as `line N: what (the line)`. */
export function historyOffences(text: string): string[] {
  return text.split("\n").flatMap((line, i) =>
    HISTORY.filter(([, re]) => re.test(line)).slice(0, 1)
      .map(([what]) => `line ${i + 1}: ${what} (${line.trim().slice(0, 80)})`)
  );
}

/** `text` without HTML comments (a commented-out link is not followed) and code. */
function prose(text: string): string {
  return text.replace(/<!--[\s\S]*?-->/g, "").replace(/^```[\s\S]*?^```/gm, "")
    .replace(/`[^`\n]*`/g, "");
}

/** The anchors GitHub gives a Markdown file's headings (`## A: b` is `#a-b`; repeats get -1, -2). */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.replace(/^```[\s\S]*?^```/gm, "").matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = m[1].toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").trim().replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/**
 * The relative links of the Markdown file `path` (relative to the repository) that lead nowhere:
 * a file that does not exist, or an anchor its target lacks. `read` gives a file's text, or null
 * when there is no such file (a directory reads as "").
 */
export async function deadLinks(
  path: string,
  text: string,
  read: (path: string) => Promise<string | null>,
): Promise<string[]> {
  const dead: string[] = [];
  const dir = path.split("/").slice(0, -1);
  for (const m of prose(text).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    const link = m[1];
    if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto:
    const [file, anchor] = link.split("#", 2);
    const parts = [...dir];
    for (const piece of file === "" ? [] : file.split("/")) {
      if (piece === "..") parts.pop();
      else if (piece !== "." && piece !== "") parts.push(piece);
    }
    const target = file === "" ? path : parts.join("/");
    const content = await read(target);
    if (content === null) dead.push(`${link}: no file ${target}`);
    else if (anchor && target.endsWith(".md") && !anchors(content).has(anchor)) {
      dead.push(`${link}: no heading #${anchor} in ${target}`);
    }
  }
  return dead;
}

async function readRepoFile(path: string): Promise<string | null> {
  try {
    const info = await Deno.stat(`${root}${path}`);
    return info.isDirectory ? "" : await Deno.readTextFile(`${root}${path}`);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

Deno.test(`README.md is a front page: at most ${README_MAX_LINES} lines`, async () => {
  const lines = (await Deno.readTextFile(`${root}README.md`)).trimEnd().split("\n").length;
  if (lines > README_MAX_LINES) {
    throw new Error(`README.md has ${lines} lines; move detail into docs/`);
  }
});

Deno.test("README.md and docs/ narrate no history (no commit hashes, machine loads, sessions)", async () => {
  const offences = (await userDocs()).flatMap(({ path, text }) =>
    historyOffences(text).map((o) => `${path} ${o}`)
  );
  if (offences.length > 0) {
    throw new Error(`history belongs in git's log and bench/RESULTS.md:\n${offences.join("\n")}`);
  }
});

Deno.test("every relative link in README.md and docs/ leads to a file (and heading) that exists", async () => {
  const dead: string[] = [];
  for (const { path, text } of await userDocs()) {
    dead.push(...(await deadLinks(path, text, readRepoFile)).map((d) => `${path}: ${d}`));
  }
  if (dead.length > 0) throw new Error(`dead links:\n${dead.join("\n")}`);
});

Deno.test("the docs' checks catch what they are for", async () => {
  const caught = (line: string) => historyOffences(line).length === 1;
  for (
    const bad of [
      "measured at f71e766 (2026-12-02)",
      "the edge at `586eb87`",
      "see commit abcdef1",
      "one run at load 15–29 on 2 cores",
      "the 1-minute load average",
      "load ≈ 2",
      "as this session found",
      "the last session measured",
    ]
  ) {
    if (!caught(bad)) throw new Error(`not caught: ${bad}`);
  }
  for (const good of ["a 54 MB pack", "load balancers", "SHA-256 pack checksum", "`1024`"]) {
    if (historyOffences(good).length !== 0) throw new Error(`wrongly caught: ${good}`);
  }
  const files: Record<string, string> = {
    "docs/a.md": "# A\n\n## The edge's own endpoints: `x`\n\n## Repeat\n\n## Repeat\n",
    "README.md": "",
    "docs": "",
  };
  const read = (p: string) => Promise.resolve(files[p] ?? null);
  const text = [
    "[ok](a.md) [ok](a.md#the-edges-own-endpoints-x) [ok](#a) [ok](a.md#repeat-1)",
    "[ok](../README.md) [ok](https://example.com/x.md) [ok](./)",
    "`[in code](nothing.md)` <!-- [commented](nothing.md) -->",
    "[dead](b.md) [dead](a.md#nowhere) [dead](../docs/c.md)",
  ].join("\n");
  const dead = await deadLinks("docs/a.md", `# A\n${text}`, read);
  if (
    dead.length !== 3 || !dead.every((d) => /^(b\.md|a\.md#nowhere|\.\.\/docs\/c\.md):/.test(d))
  ) {
    throw new Error(`deadLinks found ${JSON.stringify(dead)}`);
  }
});
