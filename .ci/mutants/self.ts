/** Mutants: This script's own restore (test/ci_mutants_test.ts). */
import type { Mutant } from "./mutant.ts";

export const SELF_MUTANTS: Mutant[] = [
  {
    name: "mutants/no-restore",
    file: ".ci/mutants.ts",
    from: "  } finally {\n    await Deno.writeTextFile(file, original);\n  }",
    to: "  } finally {\n    void original;\n  }",
    tests: ["test/ci_mutants_test.ts"],
  },
];
