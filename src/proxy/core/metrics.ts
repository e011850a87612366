/**
 * Counters, gauges and histograms exposed at `/_edge/metrics` in Prometheus text format. One
 * instance per app (per Worker isolate). Series computed when scraped (store bytes, per-repository
 * figures) come from collectors (`collect`).
 */

const HELP: Record<string, string> = {
  gitedge_requests_total: "HTTP requests handled, by route.",
  gitedge_origin_bytes_total: "Response bytes received from the origin.",
  gitedge_cache_bytes_total: "Pack bytes served from the edge's store (each response's length).",
  gitedge_origin_bytes_saved_total:
    "Bytes served from the edge's store instead of the origin, by path: uri, stream, bundle, " +
    "response-cache (mirror, lfs).",
  gitedge_packfile_uris_total: "Packfile URIs handed out in fetch responses.",
  gitedge_fetch_rewrites_total: "Fetch responses that got a packfile-uris section.",
  gitedge_fetch_answered_total:
    "Fetches the edge answered from its snapshot alone (packfile-uris and an empty pack).",
  gitedge_fetch_streamed_total:
    "Plain clones the edge answered with one pack streamed from its snapshot's packs.",
  gitedge_response_cache_total: "Fetches looked up in the response cache, by result.",
  gitedge_response_cache_bytes_total: "Bytes served from the response cache.",
  gitedge_response_cache_stored_bytes_total: "Bytes stored into the response cache.",
  gitedge_response_cache_evictions_total: "Response cache entries evicted for size.",
  gitedge_bundle_lists_total: "bundle-uri commands the edge answered with its own bundle list.",
  gitedge_bundles_served_total: "Bundles (snapshot layers) served.",
  gitedge_fetch_passthrough_total: "Fetch requests passed through unchanged, by reason.",
  gitedge_snapshot_builds_total: "Snapshot builds and refreshes started.",
  gitedge_snapshot_build_failures_total: "Snapshot builds that failed.",
  gitedge_server_restarts_total: "Times the Deno HTTP server stopped accepting and listened again.",
  gitedge_snapshot_builds_deferred_total: "Builds clones asked for while failed builds back off.",
  gitedge_requests_refused_total: "Client requests refused while reading them, by status.",
  gitedge_connections_open: "Client connections open now (Deno server).",
  gitedge_connections_refused_total:
    "Client connections refused (Deno server): over the cap, or out of file descriptors.",
  gitedge_connections_timed_out_total:
    "Client connections closed by a deadline (Deno server), by kind: header, idle, send.",
  gitedge_request_duration_seconds:
    "Time from a request's arrival to its response's headers, by route (a pack's or a " +
    "clone's body streams on after).",
  gitedge_snapshot_build_duration_seconds: "Duration of snapshot builds that published.",
  gitedge_store_evictions_total: "Snapshots evicted from the store to keep it under its cap.",
  gitedge_store_evicted_bytes_total: "Bytes of the snapshots evicted from the store.",
  gitedge_store_full_builds_skipped_total:
    "Snapshot builds not started because the store was over its cap by what it must keep.",
};

/** Bucket bounds (seconds) of every duration histogram: 5 ms to 10 min. */
export const DURATION_BUCKETS = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  120,
  300,
  600,
];

/** Series that are histograms, with their bucket bounds. */
const HISTOGRAMS: Record<string, readonly number[]> = {
  gitedge_request_duration_seconds: DURATION_BUCKETS,
  gitedge_snapshot_build_duration_seconds: DURATION_BUCKETS,
};

/**
 * Who is scraping: `perRepository` only for a caller allowed to see repository names (the admin
 * token), else collectors give aggregates without a `repo` label.
 */
export interface Scrape {
  perRepository: boolean;
}

/** One series of a collected family: its labels (none for `{}`) and value. */
export interface Sample {
  labels: Record<string, string>;
  value: number;
}

/** A family computed when scraped (a gauge or a counter kept elsewhere). */
export interface CollectedFamily {
  name: string;
  help: string;
  type: "gauge" | "counter";
  samples: Sample[];
}

/** A collected family of one unlabelled series. */
export function oneSeries(
  type: CollectedFamily["type"],
  name: string,
  help: string,
  value: number,
): CollectedFamily {
  return { name, help, type, samples: [{ labels: {}, value }] };
}

interface Histogram {
  bounds: readonly number[];
  counts: number[];
  sum: number;
  count: number;
}

/** Series that are gauges (set, not added to). */
const GAUGES = new Set(["gitedge_connections_open"]);

export class Metrics {
  readonly #values = new Map<string, Map<string, number>>();
  readonly #histograms = new Map<string, Map<string, Histogram>>();
  readonly #collectors = new Map<string, (scrape: Scrape) => Promise<CollectedFamily[]>>();

  /** Adds `by` to counter `name` with the given labels. */
  inc(name: string, by = 1, labels: Record<string, string> = {}): void {
    let series = this.#values.get(name);
    if (!series) this.#values.set(name, series = new Map());
    const key = labelText(labels);
    series.set(key, (series.get(key) ?? 0) + by);
  }

  /** Records `value` (seconds) in histogram `name` (listed in HISTOGRAMS). */
  observe(name: string, value: number, labels: Record<string, string> = {}): void {
    const bounds = HISTOGRAMS[name];
    if (!bounds) throw new Error(`${name} is not a histogram`);
    let series = this.#histograms.get(name);
    if (!series) this.#histograms.set(name, series = new Map());
    const key = labelText(labels);
    let h = series.get(key);
    if (!h) series.set(key, h = { bounds, counts: bounds.map(() => 0), sum: 0, count: 0 });
    for (let i = 0; i < bounds.length; i++) if (value <= bounds[i]) h.counts[i]++;
    h.sum += value;
    h.count++;
  }

  /**
   * Sets the source named `name` of families computed at each scrape (see {@link renderAll}); a
   * later one of the same name replaces it (apps built per request share one `Metrics`).
   */
  collect(name: string, collector: (scrape: Scrape) => Promise<CollectedFamily[]>): void {
    this.#collectors.set(name, collector);
  }

  /**
   * {@link render} plus every collector's families (a failing collector is left out), for a
   * scrape that may see per-repository series or not (the default: aggregates only).
   */
  async renderAll(scrape: Scrape = { perRepository: false }): Promise<string> {
    const lines = [this.render()];
    for (const collector of this.#collectors.values()) {
      const families = await collector(scrape).catch((error) => {
        console.error("gitedge: a metrics collector failed:", error);
        return [];
      });
      for (const f of families) {
        lines.push(`# HELP ${f.name} ${f.help}\n# TYPE ${f.name} ${f.type}\n`);
        for (const { labels, value } of f.samples) {
          const key = labelText(labels);
          lines.push(`${f.name}${key ? `{${key}}` : ""} ${value}\n`);
        }
      }
    }
    return lines.join("");
  }

  /** Sets gauge `name` (listed in GAUGES) to `value`. */
  set(name: string, value: number): void {
    this.#values.set(name, new Map([["", value]]));
  }

  /** Prometheus exposition text. */
  render(): string {
    const lines: string[] = [];
    for (const name of new Set([...Object.keys(HELP), ...this.#values.keys()])) {
      if (HELP[name]) lines.push(`# HELP ${name} ${HELP[name]}`);
      if (HISTOGRAMS[name]) {
        lines.push(`# TYPE ${name} histogram`);
        for (const [key, h] of this.#histograms.get(name) ?? []) {
          const sep = key ? "," : "";
          h.bounds.forEach((b, i) =>
            lines.push(`${name}_bucket{${key}${sep}le="${b}"} ${h.counts[i]}`)
          );
          lines.push(`${name}_bucket{${key}${sep}le="+Inf"} ${h.count}`);
          lines.push(`${name}_sum${key ? `{${key}}` : ""} ${h.sum}`);
          lines.push(`${name}_count${key ? `{${key}}` : ""} ${h.count}`);
        }
        continue;
      }
      lines.push(`# TYPE ${name} ${GAUGES.has(name) ? "gauge" : "counter"}`);
      const series = this.#values.get(name);
      if (!series || series.size === 0) lines.push(`${name} 0`);
      else for (const [k, v] of series) lines.push(k ? `${name}{${k}} ${v}` : `${name} ${v}`);
    }
    return lines.join("\n") + "\n";
  }
}

/** Prometheus label text: `k="v",…`, values with quotes, backslashes and newlines replaced. */
function labelText(labels: Record<string, string>): string {
  return Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, "_")}"`).join(",");
}

/** A passthrough stream that counts its bytes into `metrics`. */
export function countingStream(
  metrics: Metrics,
  name: string,
): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream({
    transform(chunk, controller) {
      metrics.inc(name, chunk.byteLength);
      controller.enqueue(chunk);
    },
  });
}
