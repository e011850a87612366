/**
 * The npm package's entry: `gitedge <command>` with each command bundled as its own chunk, so
 * `gitedge clone` loads only the client (the literal imports are what the bundler splits on).
 */
import { main } from "../deno/cli.ts";

Deno.exit(
  await main(Deno.args, {
    serve: () => import("../deno/serve_cli.ts"),
    clone: () => import("../../src/client/clone_cli.ts"),
    fetch: () => import("../../src/client/fetch_cli.ts"),
    version: () => import("../../src/version.ts"),
  }),
);
