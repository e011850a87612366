/**
 * gitedge's one command-line entry: `gitedge <serve|clone> [flags]`.
 */
const USAGE = `usage: gitedge <command> [options]

commands:
  serve   run the edge proxy (filesystem pack store)
  clone   clone a repository, downloading packfile URIs in parallel
  fetch   git fetch in an existing clone, packfile URIs accepted, stopped cleanly by signals

Run 'gitedge <command> --help' for a command's options, 'gitedge --version' for the version.`;

/**
 * Each command's module, loaded only when that command runs. The specifiers are deliberately not
 * string literals: `deno run` builds (loads and parses) the module graph of every literal
 * `import()` before the program starts, so `gitedge clone` would load the whole server stack
 * (the proxy, hono from npm) on each start. Resolved against this file, so any working directory
 * works.
 */
export const COMMAND_MODULES = {
  serve: new URL("./serve_cli.ts", import.meta.url).href,
  clone: new URL("../../src/client/clone_cli.ts", import.meta.url).href,
  fetch: new URL("../../src/client/fetch_cli.ts", import.meta.url).href,
  version: new URL("../../src/version.ts", import.meta.url).href,
} as const;

type ServeModule = typeof import("./serve_cli.ts");
type CloneModule = typeof import("../../src/client/clone_cli.ts");
type FetchModule = typeof import("../../src/client/fetch_cli.ts");

/** How each command's module is loaded: by URL here; the npm package's bundle loads its chunks. */
export interface CommandLoaders {
  serve(): Promise<Pick<ServeModule, "serveMain">>;
  clone(): Promise<Pick<CloneModule, "cloneMain">>;
  fetch(): Promise<Pick<FetchModule, "fetchMain">>;
  version(): Promise<{ VERSION: string }>;
}

const BY_URL: CommandLoaders = {
  serve: () => import(COMMAND_MODULES.serve),
  clone: () => import(COMMAND_MODULES.clone),
  fetch: () => import(COMMAND_MODULES.fetch),
  version: () => import(COMMAND_MODULES.version),
};

export async function main(
  args: string[],
  load: CommandLoaders = BY_URL,
): Promise<number> {
  const [command, ...rest] = args;
  switch (command) {
    case "serve":
      return await (await load.serve()).serveMain(rest);
    case "clone":
      return await (await load.clone()).cloneMain(rest);
    case "fetch":
      return await (await load.fetch()).fetchMain(rest);
    case "--version":
    case "version":
      console.log(`gitedge version ${(await load.version()).VERSION}`);
      return 0;
    case undefined:
    case "-h":
    case "--help":
    case "help":
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      console.error(`gitedge: unknown command '${command}'\n\n${USAGE}`);
      return 2;
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
