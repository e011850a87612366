/** The operator's page and per-repository metrics, as pure functions: escaping, ISO times, bounds. */
import {
  escapeHtml,
  type Overview,
  renderPage,
  statusJson,
} from "../../../src/proxy/ops/operator_page.ts";
import { Metrics } from "../../../src/proxy/core/metrics.ts";
import { RepoRegistry } from "../../../src/proxy/ops/repo_registry.ts";
import { repoFamilies } from "../../../src/proxy/ops/repo_metrics.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";
import type { RepoRef } from "../../../src/proxy/core/repo.ts";
import type { PackStore } from "../../../src/storage/store.ts";
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";

const HOSTILE = `x/<script>alert("1")</script>&'.git`;

function overviewOf(path: string, error: string | null): Overview {
  return {
    generatedAt: "2026-01-01T00:00:00.000Z",
    store: {
      bytes: 2048,
      maxBytes: 4096,
      totalBytes: 3072,
      byKind: {
        packs: 2000,
        indexes: 0,
        "snapshot-other": 48,
        "response-cache": 1024,
        lfs: 0,
        other: 0,
      },
      measuredAt: "2026-01-01T00:00:00.000Z",
    },
    totals: {
      repositories: 1,
      fetches: 3,
      fromSnapshot: 2,
      hitRatio: 2 / 3,
      originBytesSaved: 100,
      evictions: 0,
    },
    repositories: [{
      path,
      id: "0".repeat(32),
      state: "ready",
      builtAt: "2026-01-01T00:00:00.000Z",
      ageSeconds: 5,
      packs: 1,
      bytes: 100,
      builds: 1,
      lastBuild: null,
      lastError: error,
      failedAt: error ? "2026-01-01T00:00:00.000Z" : null,
      lastClonedAt: null,
      fetches: 3,
      fromSnapshot: 2,
      answered: 0,
      cached: 0,
      hitRatio: 2 / 3,
      originBytesSaved: 100,
      evictions: 0,
      evictedAt: null,
      pinnedUntil: null,
    }],
    recentFailures: error ? [{ path, at: "2026-01-01T00:00:00.000Z", error }] : [],
    notListed: 0,
  };
}

Deno.test("the operator's page escapes repository paths and errors, and has no script", () => {
  const html = renderPage(overviewOf(HOSTILE, `origin said <b>"no"</b>`));
  assert(!html.includes("<script"), "no script element, not even the repository's");
  assert(!html.includes(`<b>"no"</b>`), "the error is text");
  assert(html.includes(escapeHtml(HOSTILE)), "the path is shown, escaped");
  assertMatch(html, /67%/);
  assertMatch(html, /2\.0 KiB of 4\.0 KiB/);
  assertEquals(escapeHtml(`<a href='x'>&"`), "&#60;a href=&#39;x&#39;&#62;&#38;&#34;");
});

Deno.test("status times are ISO 8601 for HTTP", () => {
  const json = statusJson({
    state: "ready",
    tips: [],
    packs: [],
    builtAt: 0,
    builds: 2,
    lastError: null,
    failedAt: null,
    retryAt: 1_700_000_000_000,
    lastBuild: { invocations: 1, maxSubrequests: 0, startedAt: 1000, finishedAt: 3500 },
  });
  assertEquals(json.builtAt, "1970-01-01T00:00:00.000Z");
  assertEquals(json.retryAt, "2023-11-14T22:13:20.000Z");
  assertEquals(json.failedAt, null);
  assertEquals(json.lastBuild, {
    invocations: 1,
    maxSubrequests: 0,
    startedAt: "1970-01-01T00:00:01.000Z",
    finishedAt: "1970-01-01T00:00:03.500Z",
    durationSeconds: 2.5,
  });
});

Deno.test("histograms render cumulative buckets, a sum and a count, per label set", () => {
  const m = new Metrics();
  m.observe("gitedge_request_duration_seconds", 0.004, { route: "pack" });
  m.observe("gitedge_request_duration_seconds", 0.3, { route: "pack" });
  m.observe("gitedge_request_duration_seconds", 700, { route: "pack" });
  const text = m.render();
  assertMatch(text, /^# TYPE gitedge_request_duration_seconds histogram$/m);
  assertMatch(text, /^gitedge_request_duration_seconds_bucket\{route="pack",le="0\.005"\} 1$/m);
  assertMatch(text, /^gitedge_request_duration_seconds_bucket\{route="pack",le="0\.5"\} 2$/m);
  assertMatch(text, /^gitedge_request_duration_seconds_bucket\{route="pack",le="600"\} 2$/m);
  assertMatch(text, /^gitedge_request_duration_seconds_bucket\{route="pack",le="\+Inf"\} 3$/m);
  assertMatch(text, /^gitedge_request_duration_seconds_count\{route="pack"\} 3$/m);
  assertMatch(text, /^gitedge_request_duration_seconds_sum\{route="pack"\} 700\.304/m);
});

Deno.test("per-repository series name the top repositories by fetches and add the rest up as other", () => {
  const store = {} as PackStore; // the registry touches the store only when flushed or listed
  const clock = { now: () => 10_000 };
  const registry = new RepoRegistry(store, clock);
  const manifest = { builtAt: 4000, layers: [], tips: {}, version: 1, originUrl: "" } as Manifest;
  for (let i = 0; i < 5; i++) {
    const repo: RepoRef = { id: `${i}`.padStart(32, "0"), path: `r${i}.git`, originUrl: `o/${i}` };
    for (let n = 0; n <= i; n++) registry.noteFetch(repo, "rewritten", true, manifest);
  }
  const families = repoFamilies(registry, clock, 2);
  const fetches = families.find((f) => f.name === "gitedge_repo_fetches_total")!;
  assertEquals(fetches.samples, [
    { labels: { repo: "r4.git" }, value: 5 },
    { labels: { repo: "r3.git" }, value: 4 },
    { labels: { repo: "other" }, value: 3 + 2 + 1 },
  ]);
  const age = families.find((f) => f.name === "gitedge_snapshot_age_seconds")!;
  assertEquals(age.samples.map((s) => s.value), [6, 6, 6]);
});
