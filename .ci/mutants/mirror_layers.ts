/**
 * Mutants: snapshot layers and first builds packed from the git mirror, and the mirror bounded
 * and self-healing (src/proxy/snapshots/snapshot.ts `localPacks`, src/proxy/mirror/mirrors.ts
 * `packFor`/`forget`, edge/deno/mirror.ts `pack`/`missing`/`seed`, the purge route).
 */
import type { Mutant } from "./mutant.ts";

const LAYERS = "test/edge/deno/mirror_layers_test.ts";
const HEAL = "test/edge/deno/mirror_heal_test.ts";
const HOST = "test/edge/deno/mirror_host_test.ts";
const BUILDER = "test/proxy/snapshots/local_packs_test.ts";

export const MIRROR_LAYERS_MUTANTS: Mutant[] = [
  {
    name: "mirror-layers/never-local",
    file: "src/proxy/snapshots/snapshot.ts",
    from: "    const local = await this.#fromLocal(state, auth, args.wants);",
    to:
      "    const local = args.wants.length < 0 ? await this.#fromLocal(state, auth, args.wants) : null;",
    tests: [LAYERS, BUILDER],
  },
  {
    name: "mirror-layers/local-failure-fails-build",
    file: "src/proxy/snapshots/snapshot.ts",
    from:
      "    } catch {\n      await this.#deleteUnder(tmp).catch(() => {});\n      return null;\n    }",
    to: "    } catch (error) {\n      throw error;\n    }",
    tests: [BUILDER],
  },
  {
    name: "mirror-layers/no-haves",
    file: "edge/deno/mirror.ts",
    from: 'const revs = [...wants, ...haves.map((h) => `^${h}`)].join("\\n") + "\\n";',
    to: 'const revs = [...wants].join("\\n") + "\\n";',
    tests: [LAYERS],
    filter: "refresh",
  },
  {
    name: "mirror-layers/thin-layer",
    file: "edge/deno/mirror.ts",
    from: '["pack-objects", "--revs", "--delta-base-offset", "-q", `${tmp}/layer`],',
    to: '["pack-objects", "--revs", "--thin", "--delta-base-offset", "-q", `${tmp}/layer`],',
    tests: [LAYERS],
    filter: "refresh",
  },
  {
    name: "mirror-layers/damaged-kept",
    file: "src/proxy/mirror/mirrors.ts",
    from: "      await this.discard(repo.id).catch(() => {});\n      return null;",
    to: "      return null;",
    tests: [HEAL],
    filter: "corrupted",
  },
  {
    name: "mirror-layers/orphaned-never-noted",
    file: "src/proxy/snapshots/snapshot.ts",
    from: "        ...(orphaned ? { orphaned: true as const } : {}),",
    to: "        ...({}),",
    tests: [HEAL],
    filter: "ref deleted",
  },
  {
    name: "mirror-layers/orphaned-mirror-kept",
    file: "src/proxy/snapshots/snapshot.ts",
    from: "    if (state.orphaned) await this.#localPacks?.forget(state.repo, manifest);",
    to:
      "    if (state.orphaned && state.written.length < 0) {\n      await this.#localPacks?.forget(state.repo, manifest);\n    }",
    tests: [HEAL],
    filter: "ref deleted",
  },
  {
    name: "mirror-layers/purge-keeps-mirror",
    file: "src/proxy/app.ts",
    from: "    const mirror = deps.mirrors ? await deps.mirrors.forget(repo) : false;",
    to: "    const mirror = false;",
    tests: [HEAL],
    filter: "purge",
  },
  {
    name: "mirror-layers/seed-unchecked",
    file: "edge/deno/mirror.ts",
    from:
      'await this.#run(["fsck", "--connectivity-only", "--no-dangling", "--no-progress"], {\n        cwd: tmp,',
    to: 'await this.#run(["--version"], {\n        cwd: tmp,',
    tests: [HOST],
    filter: "lack an object",
  },
  {
    name: "mirror-layers/present-is-whole",
    file: "edge/deno/mirror.ts",
    from: "    if (present.size > 0 && !await this.#whole(repo, [...present])) {",
    to: "    if (present.size < 0 && !await this.#whole(repo, [...present])) {",
    // The update now indexes whole packs (nothing half-written to see): the host test's commit
    // without its tree stands for an update cut short between objects.
    tests: [HOST],
  },
  {
    name: "mirror-layers/damaged-taken-for-cut-update",
    file: "edge/deno/mirror.ts",
    from:
      "        throw new MirrorDamagedError(error instanceof Error ? error.message : String(error));",
    to: "        void error;",
    tests: ["test/edge/deno/mirror_test.ts"],
    filter: "damaged",
  },
  {
    name: "mirror-layers/damaged-not-discarded-by-ensure",
    file: "src/proxy/mirror/mirrors.ts",
    from:
      "        await this.discard(repo.id).catch(() => {});\n        return { ready: false, reason: `damaged: ${error.message}` };",
    to: "        return { ready: false, reason: `damaged: ${error.message}` };",
    tests: ["test/edge/deno/mirror_test.ts"],
    filter: "damaged",
  },
  {
    name: "mirror-layers/reseed-from-old-snapshot",
    file: "src/proxy/mirror/mirrors.ts",
    from:
      '          if (this.#tooOld(repo, m)) throw new Error("snapshot older than the mirror\'s discard");',
    to: "",
    tests: ["test/proxy/mirror/mirror_forget_test.ts"],
  },
  {
    name: "mirror-layers/seed-from-old-snapshot",
    file: "src/proxy/mirror/mirrors.ts",
    from: "      if (await this.host.exists(repo) || this.#tooOld(repo, manifest)) return;",
    to: "      if (await this.host.exists(repo)) return;",
    tests: ["test/proxy/mirror/mirror_forget_test.ts"],
  },
  {
    name: "mirror-layers/no-sweep",
    file: "edge/deno/server.ts",
    from: "      await host.sweepLeftovers();",
    to: "",
    tests: [HEAL],
    filter: "start-up",
  },
];
