/** Mutants: Trusted edge indexes (gitedge clone --trust-edge-index). */
import { EDGE_INDEX, type Mutant } from "./mutant.ts";

export const EDGE_INDEX_MUTANTS: Mutant[] = [
  {
    name: "edge_index/trailer-unchecked",
    file: "src/client/edge_index.ts",
    from: "if (pack.trailer !== pack.computed || pack.computed !== hash) {",
    to: "if (pack.computed !== hash) {",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/announced-hash-unchecked",
    file: "src/client/edge_index.ts",
    from: "if (pack.trailer !== pack.computed || pack.computed !== hash) {",
    to: "if (pack.trailer !== pack.computed) {",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/idx-pack-checksum-unchecked",
    file: "src/client/edge_index.ts",
    from: "if (toHex(idx.subarray(end, end + h)) !== pack.computed) {",
    to: "if (false) {",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/idx-own-checksum-unchecked",
    file: "src/client/edge_index.ts",
    from: 'if (toHex(idx.subarray(end + h)) !== own) return "its own checksum does not match";',
    to: "",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/offsets-unbounded",
    file: "src/client/edge_index.ts",
    from: "if (offset < 12 || offset >= dataEnd) {",
    to: "if (offset < 12) {",
    tests: [EDGE_INDEX],
  },
  {
    name: "edge_index/object-count-unchecked",
    file: "src/client/edge_index.ts",
    from: "if (n !== pack.objects) return `it lists ${n} objects, the pack has ${pack.objects}`;",
    to: "",
    tests: [EDGE_INDEX],
  },
];
