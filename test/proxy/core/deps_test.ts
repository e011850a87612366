import { inBackground } from "../../../src/proxy/core/deps.ts";
import type { LogFields } from "../../../src/proxy/core/log.ts";
import { assertEquals } from "../../support/assert.ts";

Deno.test("background work: kept alive by waitUntil, a failure logged, never thrown", async () => {
  const kept: Promise<unknown>[] = [];
  const records: [string, string, LogFields | undefined][] = [];
  const deps = {
    waitUntil: (p: Promise<unknown>) => kept.push(p),
    log: {
      enabled: () => true,
      log: (l: string, e: string, f?: LogFields) => records.push([l, e, f]),
    },
  };
  inBackground(deps, Promise.resolve(1));
  inBackground(deps, Promise.reject(new Error("boom")));
  await Promise.all(kept);
  assertEquals(kept.length, 2);
  assertEquals(records.map(([l, e, f]) => [l, e, (f?.error as Error).message]), [
    ["error", "background.failed", "boom"],
  ]);
});
