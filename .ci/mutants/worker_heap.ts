/** Mutants: the snapshot build's memory per object (the Worker's isolate has 128 MB). */
import type { Mutant } from "./mutant.ts";

const SPLIT_MEMORY = "test/git/pack_split_memory_test.ts";

export const WORKER_HEAP_MUTANTS: Mutant[] = [
  {
    // The comparator sort copies every delta family into two arrays of the engine's heap.
    name: "pack_split/comparator-sort",
    file: "src/git/pack_split.ts",
    from: "  if ((total + 1) * n > Number.MAX_SAFE_INTEGER) {\n",
    to: "  if (true) {\n",
    tests: [SPLIT_MEMORY],
    filter: "working memory",
  },
  {
    // A split trusting the index's header length reads type and size from the wrong bytes.
    name: "pack_split/header-length-unchecked",
    file: "src/git/pack_split.ts",
    from: "  if (parsed === undefined || parsed.length !== entry.headerLength) {\n",
    to: "  if (parsed === undefined) {\n",
    tests: [SPLIT_MEMORY],
    filter: "not what the index says",
  },
];
