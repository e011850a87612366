/**
 * gitedge's one command-line entry: `gitedge <serve|clone> [flags]`.
 */
const USAGE = `usage: gitedge <command> [options]

commands:
  serve   run the edge proxy (filesystem pack store)
  clone   clone a repository, downloading packfile URIs in parallel

Run 'gitedge <command> --help' for a command's options.`;

export async function main(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  switch (command) {
    case "serve": {
      const { serveMain } = await import("./serve_cli.ts");
      return await serveMain(rest);
    }
    case "clone": {
      const { cloneMain } = await import("../../src/client/clone_cli.ts");
      return await cloneMain(rest);
    }
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
