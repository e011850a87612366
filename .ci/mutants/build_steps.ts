/** Mutants: Snapshot builds carried across invocations. */
import { BUILD_STEPS, type Mutant } from "./mutant.ts";

export const BUILD_STEPS_MUTANTS: Mutant[] = [
  {
    name: "snapshot/abandon-keeps-packs",
    file: "src/proxy/snapshots/snapshot.ts",
    from: "    await this.#deleteUnder(`${packPrefix(state.repo)}${state.id}-`);\n",
    to: "",
    tests: [BUILD_STEPS],
  },
  {
    name: "snapshot/abandon-keeps-segments",
    file: "src/proxy/snapshots/snapshot.ts",
    from:
      "  async abandon(state: BuildState): Promise<void> {\n    await this.#deleteUnder(tmpPrefix(state.repo.id, state.id));\n",
    to: "  async abandon(state: BuildState): Promise<void> {\n",
    tests: [BUILD_STEPS],
  },
  {
    name: "snapshot/begin-keeps-leftovers",
    file: "src/proxy/snapshots/snapshot.ts",
    from: "    await this.#deleteUnder(tmpPrefix(repo.id));\n",
    to: "",
    tests: [BUILD_STEPS],
  },
  {
    name: "repo_snapshots/attempts-not-reset",
    file: "src/proxy/snapshots/repo_snapshots.ts",
    from: "await storage.put(BUILD_KEY, { ...pending, state: progress.state, attempts: 0 });",
    to: "await storage.put(BUILD_KEY, { ...pending, state: progress.state });",
    tests: [BUILD_STEPS],
  },
  {
    name: "repo_snapshots/failed-step-not-abandoned",
    file: "src/proxy/snapshots/repo_snapshots.ts",
    from: "      await builder.abandon(pending.state).catch(() => {});\n      await storage.delete",
    to: "      await storage.delete",
    tests: [BUILD_STEPS],
  },
  {
    name: "repo_snapshots/retries-forever",
    file: "src/proxy/snapshots/repo_snapshots.ts",
    from: "if (pending.attempts < MAX_STEP_ATTEMPTS) {",
    to: "if (pending.attempts < 1000) {",
    tests: [BUILD_STEPS],
  },
];
