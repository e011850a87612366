/**
 * The one value gitedge takes from the Workers runtime's built-in module `cloudflare:workers`,
 * declared locally for `deno check` (`worker_types.ts` says why not `@cloudflare/workers-types`).
 * The module exists only inside workerd: a bundle keeps the import external (`deno bundle
 * --external cloudflare:workers` in the tests; wrangler's esbuild does so by itself), so no Deno
 * process may load a module that imports it.
 */
declare module "cloudflare:workers" {
  /**
   * The base class of Durable Objects that serve RPC: the runtime calls a public method of the
   * object when a Worker calls it on a stub. It keeps the state and bindings it was built with.
   */
  export abstract class DurableObject<Env = unknown, State = unknown> {
    protected ctx: State;
    protected env: Env;
    constructor(ctx: State, env: Env);
  }
}
