/**
 * Builds the npm package: the CLI bundled by `deno bundle` (one chunk per command, so a clone
 * never loads the server), the Node launcher, the CI checkout script and package.json; with
 * `--pack`, `npm pack`s it.
 *
 *   deno run --no-config -A edge/npm/build.ts [--out DIR] [--pack]   # prints the dir or tarball
 *
 * Output: DIR/package/ and, with `--pack`, DIR/gitedge-<version>.tgz; DIR is `dist/npm` in this
 * checkout unless `--out` names another (docs/install.md). The bundle is made under
 * `edge/deno/serve.json` (the server's own imports and lock), so building fetches hono and noble
 * only, never the test stack. The package depends on `deno` only: hono and noble are inside the
 * bundle, and nothing of the test stack (miniflare, workerd, isomorphic-git) is.
 */
import { VERSION } from "../../src/version.ts";

const here = new URL(".", import.meta.url).pathname;
const root = new URL("../../", import.meta.url).pathname;

export interface NpmBuild {
  /** The package directory (package.json, gitedge.cjs, dist/). */
  dir: string;
  /** The tarball `npm pack` wrote, with `pack`. */
  tarball?: string;
}

async function run(cmd: string, args: string[], cwd: string): Promise<string> {
  const out = await new Deno.Command(cmd, {
    args,
    cwd,
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(
      `${cmd} ${args.join(" ")} failed:\n${new TextDecoder().decode(out.stderr)}`,
    );
  }
  return text;
}

/** Builds the package into `out` (emptied first) and, with `pack`, packs it there. */
export async function buildNpmPackage(
  out: string,
  pack = false,
): Promise<NpmBuild> {
  const dir = `${out}/package`;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  await run(Deno.execPath(), [
    "bundle",
    "--quiet",
    "--platform=deno",
    "--code-splitting",
    // The S3 and Redis clients (an edge fleet's, loaded only when configured) stay out of the
    // package: a fleet runs the edge from a checkout (docs/fleet.md).
    "--external=@aws-sdk/client-s3",
    "--external=redis",
    `--config=${root}edge/deno/serve.json`,
    `--outdir=${dir}/dist`,
    `${here}entry.ts`,
  ], root);
  const manifest = JSON.parse(await Deno.readTextFile(`${here}package.json`));
  await Deno.writeTextFile(
    `${dir}/package.json`,
    JSON.stringify({ ...manifest, version: VERSION }, null, 2) + "\n",
  );
  for (const file of ["gitedge.cjs", "../ci/checkout.sh"]) {
    await Deno.copyFile(`${here}${file}`, `${dir}/${file.replace(/.*\//, "")}`);
  }
  await Deno.chmod(`${dir}/gitedge.cjs`, 0o755);
  await Deno.chmod(`${dir}/checkout.sh`, 0o755);
  if (!pack) return { dir };
  const name = (await run("npm", ["pack", "--silent", `--pack-destination=${out}`], dir))
    .trim();
  return { dir, tarball: `${out}/${name.split("\n").at(-1)}` };
}

if (import.meta.main) {
  const args = Deno.args;
  const at = args.indexOf("--out");
  if (at >= 0 && !args[at + 1]) {
    console.error("build.ts: --out needs a directory");
    Deno.exit(2);
  }
  const out = at >= 0 ? args[at + 1] : `${root}dist/npm`;
  const built = await buildNpmPackage(out, args.includes("--pack"));
  console.log(built.tarball ?? built.dir);
}
