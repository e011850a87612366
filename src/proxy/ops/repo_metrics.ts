/**
 * Per-repository series for dashboards, with a bounded number of label values: the
 * {@link TOP_REPOS} repositories with the most fetches in this process (Worker isolate) are named
 * (`repo="x/y.git"`), the rest add up under `repo="other"`. Names only for a scrape allowed to
 * see them (the admin token); any other scrape gets every repository under `repo="other"`. Plus the store's use against its cap.
 * Computed at each scrape from the registry and the evictor (see `Metrics.collect`).
 */
import type { Clock } from "../core/deps.ts";
import { type CollectedFamily, oneSeries, type Sample, type Scrape } from "../core/metrics.ts";
import type { Counts, RepoRegistry } from "./repo_registry.ts";
import type { StoreEvictor } from "./store_eviction.ts";

/** Repositories named in per-repository series; the others are `other`. */
export const TOP_REPOS = 20;

export function repoFamilies(
  registry: RepoRegistry,
  clock: Clock,
  top = TOP_REPOS,
  scrape: Scrape = { perRepository: true },
): CollectedFamily[] {
  const all = registry.traffic().sort((a, b) =>
    b.counts.fetches - a.counts.fetches || b.counts.packBytes - a.counts.packBytes
  );
  // A scrape without the admin token sees no repository's name: everything is `other`.
  const named = scrape.perRepository ? all.slice(0, top) : [];
  const rest = all.slice(named.length);
  const counter = (key: keyof Counts): Sample[] => {
    const samples = named.map((r) => ({ labels: { repo: r.path }, value: r.counts[key] }));
    if (rest.length > 0) {
      samples.push({
        labels: { repo: "other" },
        value: rest.reduce((n, r) => n + r.counts[key], 0),
      });
    }
    return samples;
  };
  const now = clock.now();
  const age = (builtAt: number | null) =>
    builtAt === null ? null : Math.max(0, (now - builtAt) / 1000);
  const ages: Sample[] = [];
  for (const r of named) {
    const a = age(r.builtAt);
    if (a !== null) ages.push({ labels: { repo: r.path }, value: a });
  }
  const restAges = rest.map((r) => age(r.builtAt)).filter((a): a is number => a !== null);
  if (restAges.length > 0) ages.push({ labels: { repo: "other" }, value: Math.max(...restAges) });
  return [
    {
      name: "gitedge_repo_fetches_total",
      help: `Fetches per repository (top ${top} by fetches, the rest as other).`,
      type: "counter",
      samples: counter("fetches"),
    },
    {
      name: "gitedge_repo_snapshot_fetches_total",
      help: "Fetches per repository that got the snapshot's packs (hit ratio: over " +
        "gitedge_repo_fetches_total).",
      type: "counter",
      samples: counter("fromSnapshot"),
    },
    {
      name: "gitedge_repo_pack_bytes_total",
      help:
        "Bytes served from the store per repository, every path (packs by URI, streamed clones, " +
        "bundles, the response cache): bytes the origin did not send.",
      type: "counter",
      samples: counter("packBytes"),
    },
    {
      name: "gitedge_snapshot_age_seconds",
      help: "Age of the snapshot in force per repository, as last seen (other: the oldest).",
      type: "gauge",
      samples: ages,
    },
  ];
}

/** The store's use and cap. */
export async function storeFamilies(evictor: StoreEvictor): Promise<CollectedFamily[]> {
  const usage = await evictor.usage();
  return [
    oneSeries(
      "gauge",
      "gitedge_store_bytes",
      "Bytes of snapshots and LFS objects in the store (measured at most every 30 s).",
      usage.bytes,
    ),
    oneSeries(
      "gauge",
      "gitedge_store_lfs_objects",
      "LFS objects in the store (measured with gitedge_store_bytes).",
      usage.lfsObjects ?? 0,
    ),
    oneSeries(
      "gauge",
      "gitedge_store_lfs_bytes",
      "Bytes of LFS objects in the store (part of gitedge_store_bytes).",
      usage.lfsBytes ?? 0,
    ),
    {
      name: "gitedge_store_kind_bytes",
      help: "Bytes of everything in the store by kind: packs, indexes, snapshot-other, " +
        "response-cache, lfs, other (measured at most every 30 s).",
      type: "gauge",
      samples: Object.entries(usage.byKind).map(([kind, value]) => ({ labels: { kind }, value })),
    },
    oneSeries(
      "gauge",
      "gitedge_store_max_bytes",
      "The store's cap for snapshots (0: none).",
      usage.maxBytes,
    ),
  ];
}
