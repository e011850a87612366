import { routeOf } from "../../../src/proxy/ops/request_log.ts";
import { assertEquals } from "../../support/assert.ts";

Deno.test("one route label per path, for the log and the metrics alike", () => {
  const cases: [string, { route: string; repo?: string }][] = [
    ["/r.git/info/refs", { route: "info/refs", repo: "r.git" }],
    ["/a/b.git/git-upload-pack", { route: "git-upload-pack", repo: "a/b.git" }],
    [`/_edge/packs/${"0".repeat(32)}/pack-1.pack`, { route: "pack" }],
    [`/_edge/bundles/${"0".repeat(32)}/l1.bundle`, { route: "bundle" }],
    ["/_edge/bundle-list/r.git", { route: "bundle-list" }],
    ["/_edge/health/live", { route: "health/live" }],
    ["/_edge/health/ready", { route: "health/ready" }],
    ["/_edge/health/other", { route: "other" }],
    ["/_edge", { route: "page" }],
    ["/_edge/", { route: "page" }],
    ["/_edge/repos", { route: "repos" }],
    ["/_edge/metrics", { route: "metrics" }],
    ["/_edge/status/r.git/", { route: "status", repo: "r.git" }],
    ["/_edge/warm/a/r.git", { route: "warm", repo: "a/r.git" }],
    ["/_edge/anything-else/x", { route: "other" }],
    ["/favicon.ico", { route: "other" }],
  ];
  for (const [path, want] of cases) assertEquals(routeOf(path), want, path);
});
