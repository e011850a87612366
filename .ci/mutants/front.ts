/** Mutants: The Deno server's front. */
import { FRONT, type Mutant } from "./mutant.ts";

export const FRONT_MUTANTS: Mutant[] = [
  {
    name: "front/send-timeout-off",
    file: "edge/deno/front.ts",
    from:
      'if (conn.writingSince) return now - conn.writingSince > idleTimeoutMs ? "send" : undefined;',
    to: "if (conn.writingSince) return undefined;",
    tests: [FRONT],
  },
  {
    name: "front/header-timeout-off",
    file: "edge/deno/front.ts",
    from: 'if (conn.phase === "headers" && now - conn.since > headerTimeoutMs) return "header";',
    to: "",
    tests: [FRONT],
    filter: "header timeout",
  },
  {
    name: "front/idle-timeout-off",
    file: "edge/deno/front.ts",
    from: 'if (conn.phase === "waiting" && now - quietSince > idleTimeoutMs) return "idle";',
    to: "",
    tests: [FRONT],
    filter: "idle timeout",
  },
  {
    name: "front/nagle-on",
    file: "edge/deno/front.ts",
    from: "for (const c of [client, upstream]) c.setNoDelay(true);",
    to: "",
    tests: [FRONT],
    filter: "Nagle",
  },
];
