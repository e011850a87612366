/** Counters exposed at `/_edge/metrics` in Prometheus text format. One instance per app. */

const HELP: Record<string, string> = {
  gitedge_requests_total: "HTTP requests handled, by route.",
  gitedge_origin_bytes_total: "Response bytes received from the origin.",
  gitedge_cache_bytes_total: "Pack bytes served from the edge's store (each response's length).",
  gitedge_packfile_uris_total: "Packfile URIs handed out in fetch responses.",
  gitedge_fetch_rewrites_total: "Fetch responses that got a packfile-uris section.",
  gitedge_fetch_answered_total:
    "Fetches the edge answered from its snapshot alone (packfile-uris and an empty pack).",
  gitedge_response_cache_total:
    "Fetches without have lines looked up in the response cache, by result.",
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
};

/** Series that are gauges (set, not added to). */
const GAUGES = new Set(["gitedge_connections_open"]);

export class Metrics {
  readonly #values = new Map<string, Map<string, number>>();

  /** Adds `by` to counter `name` with the given labels. */
  inc(name: string, by = 1, labels: Record<string, string> = {}): void {
    let series = this.#values.get(name);
    if (!series) this.#values.set(name, series = new Map());
    const key = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, "_")}"`)
      .join(",");
    series.set(key, (series.get(key) ?? 0) + by);
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
      lines.push(`# TYPE ${name} ${GAUGES.has(name) ? "gauge" : "counter"}`);
      const series = this.#values.get(name);
      if (!series || series.size === 0) lines.push(`${name} 0`);
      else for (const [k, v] of series) lines.push(k ? `${name}{${k}} ${v}` : `${name} ${v}`);
    }
    return lines.join("\n") + "\n";
  }
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
