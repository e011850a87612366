/**
 * The operator's view of the edge: every repository it knows (the registry), its snapshot (state,
 * age, packs and bytes, the last build and how long it took, failures), its traffic (fetches, the
 * share served from the snapshot, pack bytes the origin did not have to send), and the store's use
 * against its cap. As JSON (`/_edge/repos`) and as one HTML page (`/_edge/`): no script, no
 * external asset, every value escaped (repository paths are whatever clients asked for).
 *
 * Times are ISO 8601 (UTC), durations and ages in seconds.
 */
import type { SnapshotCoordinator, SnapshotStatus } from "../core/deps.ts";
import type { Mirrors } from "../mirror/mirrors.ts";
import type { RepoRef } from "../core/repo.ts";
import { mapLimit, type RepoRecord } from "./repo_registry.ts";
import type { StoreKind, StoreUsage } from "./store_eviction.ts";

/** Repositories listed at most (the most recently cloned first). */
export const MAX_LISTED = 200;
/** Failures listed at most. */
const MAX_FAILURES = 20;

/** One repository as the page shows it. */
export interface RepoView {
  path: string;
  id: string;
  /** `ready`, `building`, `none` (never built, or failed), `evicted` (from the store, for its cap). */
  state: "ready" | "building" | "none" | "evicted";
  builtAt: string | null;
  ageSeconds: number | null;
  packs: number;
  bytes: number;
  builds: number;
  lastBuild:
    | { startedAt: string; finishedAt: string | null; durationSeconds: number | null }
    | null;
  lastError: string | null;
  failedAt: string | null;
  lastClonedAt: string | null;
  fetches: number;
  fromSnapshot: number;
  answered: number;
  cached: number;
  /** `fromSnapshot / fetches`, or null before any fetch. */
  hitRatio: number | null;
  /**
   * Bytes served from the store, every path (packs by URI, streamed plain clones, bundles, the
   * response cache): bytes the origin did not send.
   */
  originBytesSaved: number;
  evictions: number;
  evictedAt: string | null;
  /** Pack URLs handed out may be valid until then (the snapshot is not evicted before). */
  pinnedUntil: string | null;
  /** The repository's git mirror, where the edge keeps mirrors (the Deno server). */
  mirror?: { state: "none" | "ready" | "updating"; bytes: number; updatedAt: string | null };
}

export interface Overview {
  generatedAt: string;
  /** The store's use; null for a caller who sees only what the origin lets it read. */
  store: {
    /** Snapshots: what the cap counts. */
    bytes: number;
    maxBytes: number | null;
    /** Everything in the store, and by kind. */
    totalBytes: number;
    byKind: Record<StoreKind, number>;
    measuredAt: string;
  } | null;
  /**
   * LFS objects in the store, and this process's downloads of them from the store and origin
   * (absent for a caller who sees only what the origin lets it read).
   */
  lfs?: {
    objects: number;
    bytes: number;
    hits: number;
    misses: number;
    hitRatio: number | null;
  };
  totals: {
    repositories: number;
    fetches: number;
    fromSnapshot: number;
    hitRatio: number | null;
    originBytesSaved: number;
    evictions: number;
  };
  repositories: RepoView[];
  /**
   * The git mirrors, where the edge keeps them: answers and their bytes, snapshot layers packed
   * from them and theirs (both: bytes the origin did not send), updates, discards, their disk.
   */
  mirrors?: {
    answers: number;
    bytes: number;
    updates: number;
    layers: number;
    layerBytes: number;
    discards: number;
    diskBytes: number;
  };
  /** Repositories whose last build failed, the latest first. */
  recentFailures: { path: string; at: string | null; error: string }[];
  /**
   * Repositories known but not listed (beyond {@link MAX_LISTED}); null for a caller who sees only
   * what the origin lets it read (a count of the others would tell it of repositories it may not
   * know of).
   */
  notListed: number | null;
}

export function iso(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined || !Number.isFinite(ms)
    ? null
    : new Date(ms).toISOString();
}

/** A status for HTTP: times as ISO 8601 (the app keeps them as ms since epoch). */
export function statusJson(status: SnapshotStatus): Record<string, unknown> {
  const out: Record<string, unknown> = { ...status, builtAt: iso(status.builtAt) };
  if ("retryAt" in status) out.retryAt = iso(status.retryAt);
  if ("failedAt" in status) out.failedAt = iso(status.failedAt);
  if (status.lastBuild) {
    const b = status.lastBuild;
    out.lastBuild = {
      ...b,
      startedAt: iso(b.startedAt),
      finishedAt: iso(b.finishedAt),
      durationSeconds: b.finishedAt === undefined ? null : (b.finishedAt - b.startedAt) / 1000,
    };
  }
  return out;
}

/**
 * The overview of `records` (those `visible` lets through, the most recently cloned first, at
 * most `limit` and {@link MAX_LISTED}), with each one's status from the coordinator.
 */
export async function overview(
  records: RepoRecord[],
  coordinator: SnapshotCoordinator,
  usage: StoreUsage,
  now: number,
  opts: {
    visible?: (repo: RepoRef) => Promise<boolean>;
    limit?: number;
    lfs?: { hits: number; misses: number };
    mirrors?: Mirrors;
  } = {},
): Promise<Overview> {
  const sorted = [...records].sort((a, b) =>
    (b.lastClonedAt ?? b.firstSeenAt) - (a.lastClonedAt ?? a.firstSeenAt)
  );
  const candidates = sorted.slice(0, Math.min(opts.limit ?? MAX_LISTED, MAX_LISTED));
  const visible = opts.visible ?? (() => Promise.resolve(true));
  const rows = await mapLimit(candidates, 8, async (r): Promise<RepoView | null> => {
    const repo: RepoRef = { id: r.id, path: r.path, originUrl: r.originUrl };
    if (!await visible(repo)) return null;
    const status = await coordinator.status(repo).catch(() => null);
    const row = view(r, status, now);
    const mirror = await opts.mirrors?.status(repo).catch(() => null);
    if (mirror) row.mirror = { ...mirror, updatedAt: iso(mirror.updatedAt) };
    return row;
  });
  const repositories = rows.filter((r): r is RepoView => r !== null);
  const sum = (f: (r: RepoView) => number) => repositories.reduce((n, r) => n + f(r), 0);
  const fetches = sum((r) => r.fetches);
  const fromSnapshot = sum((r) => r.fromSnapshot);
  return {
    generatedAt: iso(now)!,
    // A caller who sees only what the origin lets it read learns nothing of the rest: neither
    // the store's size (the sum of every repository's) nor how many were left out.
    store: opts.visible ? null : {
      bytes: usage.bytes,
      maxBytes: usage.maxBytes || null,
      totalBytes: usage.totalBytes,
      byKind: usage.byKind,
      measuredAt: iso(usage.at)!,
    },
    lfs: opts.visible ? undefined : lfsView(usage, opts.lfs ?? { hits: 0, misses: 0 }),
    totals: {
      repositories: repositories.length,
      fetches,
      fromSnapshot,
      hitRatio: fetches ? fromSnapshot / fetches : null,
      originBytesSaved: sum((r) => r.originBytesSaved),
      evictions: sum((r) => r.evictions),
    },
    repositories,
    ...(opts.mirrors
      ? {
        mirrors: {
          answers: opts.mirrors.served,
          bytes: opts.mirrors.servedBytes,
          updates: opts.mirrors.updates,
          layers: opts.mirrors.layers,
          layerBytes: opts.mirrors.layerBytes,
          discards: opts.mirrors.discards,
          diskBytes: await opts.mirrors.diskBytes().catch(() => 0),
        },
      }
      : {}),
    recentFailures: repositories
      .filter((r) => r.lastError !== null)
      .sort((a, b) => (b.failedAt ?? "").localeCompare(a.failedAt ?? ""))
      .slice(0, MAX_FAILURES)
      .map((r) => ({ path: r.path, at: r.failedAt, error: r.lastError! })),
    notListed: opts.visible ? null : records.length - repositories.length,
  };
}

function view(r: RepoRecord, status: SnapshotStatus | null, now: number): RepoView {
  const builtAt = status?.builtAt ?? r.builtAt;
  const evicted = r.evictedAt !== null && (builtAt === null || r.evictedAt >= builtAt);
  const state = status?.state === "building"
    ? "building"
    : evicted
    ? "evicted"
    : status?.state ?? (builtAt !== null ? "ready" : "none");
  const packs = status?.packs ?? [];
  const last = status?.lastBuild;
  return {
    path: r.path,
    id: r.id,
    state,
    builtAt: evicted ? null : iso(builtAt),
    ageSeconds: evicted || builtAt === null
      ? null
      : Math.max(0, Math.round((now - builtAt) / 1000)),
    packs: evicted ? 0 : status ? packs.length : r.packs,
    bytes: evicted ? 0 : status ? packs.reduce((n, p) => n + p.bytes, 0) : r.snapshotBytes,
    builds: status?.builds ?? 0,
    lastBuild: last
      ? {
        startedAt: iso(last.startedAt)!,
        finishedAt: iso(last.finishedAt),
        durationSeconds: last.finishedAt === undefined
          ? null
          : (last.finishedAt - last.startedAt) / 1000,
      }
      : null,
    lastError: status?.lastError ?? null,
    failedAt: iso(status?.failedAt),
    lastClonedAt: iso(r.lastClonedAt),
    fetches: r.fetches,
    fromSnapshot: r.fromSnapshot,
    answered: r.answered,
    cached: r.cached,
    hitRatio: r.fetches ? r.fromSnapshot / r.fetches : null,
    originBytesSaved: r.packBytes,
    evictions: r.evictions,
    evictedAt: iso(r.evictedAt),
    pinnedUntil: r.pinnedUntil > now ? iso(r.pinnedUntil) : null,
  };
}

/** `text` safe in HTML text and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Bytes for people: `1.5 MiB`. */
export function humanBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

/** Seconds for people: `45 s`, `12 min`, `3.5 h`, `2.0 d`. */
export function humanSeconds(s: number): string {
  if (s < 60) return `${Math.round(s * 10) / 10} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

/** An ISO 8601 time as a `<time>`: shown as `YYYY-MM-DD HH:MM:SS` (UTC), exact in `datetime`. */
function timeHtml(isoTime: string | null): string {
  if (isoTime === null) return "–";
  const shown = isoTime.replace("T", " ").replace(/\.\d+Z$/, "Z");
  return `<time datetime="${escapeHtml(isoTime)}">${escapeHtml(shown)}</time>`;
}

function percent(ratio: number | null): string {
  return ratio === null ? "–" : `${Math.round(ratio * 100)}%`;
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24;background:#fff}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}
.sub{color:#57606a;margin:0 0 1em}
.cards{display:flex;flex-wrap:wrap;gap:.8em}
.card{border:1px solid #d0d7de;border-radius:6px;padding:.5em .9em;min-width:10em}
.card b{display:block;font-size:1.3em}.kinds{color:#57606a;font-size:.9em}
.bar{height:.5em;background:#eaeef2;border-radius:3px;margin-top:.3em}
.bar i{display:block;height:100%;background:#2da44e;border-radius:3px}
.bar.over i{background:#cf222e}
table{border-collapse:collapse;width:100%;margin-top:.4em}
th,td{border-bottom:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
time{white-space:nowrap}
.path{font-family:ui-monospace,monospace;word-break:break-all}
.st{border-radius:1em;padding:0 .6em;font-size:.9em;white-space:nowrap}
.ready{background:#dafbe1}.building{background:#fff8c5}.none{background:#eaeef2}
.evicted{background:#ffebe9}.err{color:#cf222e}
`;

function lfsView(usage: StoreUsage, counts: { hits: number; misses: number }): Overview["lfs"] {
  const served = counts.hits + counts.misses;
  return {
    objects: usage.lfsObjects ?? 0,
    bytes: usage.lfsBytes ?? 0,
    hits: counts.hits,
    misses: counts.misses,
    hitRatio: served ? counts.hits / served : null,
  };
}

const KIND_NAMES: Record<StoreKind, string> = {
  packs: "packs",
  indexes: "pack indexes",
  "snapshot-other": "manifests and builds",
  "response-cache": "response cache",
  lfs: "LFS objects",
  other: "other",
};

/** The HTML page of `o`: self-contained, no script. */
export function renderPage(o: Overview): string {
  const e = escapeHtml;
  const s = o.store;
  const fill = s?.maxBytes ? Math.min(1, s.bytes / s.maxBytes) : 0;
  const kinds = (Object.entries(s?.byKind ?? {}) as [StoreKind, number][])
    .filter(([, n]) => n > 0)
    .map(([kind, n]) => `${e(KIND_NAMES[kind])} ${e(humanBytes(n))}`)
    .join(" · ");
  const storeCard = !s ? "" : `<div class="card">Store<b>${e(humanBytes(s.totalBytes))}</b>` +
    `<span class="kinds">${kinds || "empty"}</span>` +
    (s.maxBytes
      ? `<br>snapshots ${e(humanBytes(s.bytes))} of ${e(humanBytes(s.maxBytes))} cap` +
        `<div class="bar${s.bytes > s.maxBytes ? " over" : ""}"><i style="width:${
          (fill * 100).toFixed(1)
        }%"></i></div>`
      : "<br>no cap") +
    `</div>`;
  const t = o.totals;
  const cards = [
    `<div class="card">Repositories<b>${t.repositories}</b></div>`,
    storeCard,
    `<div class="card">Fetches<b>${t.fetches}</b>${e(percent(t.hitRatio))} from the snapshot</div>`,
    `<div class="card">Origin bytes saved<b>${
      e(humanBytes(t.originBytesSaved))
    }</b>by URI, stream, bundle, cache</div>`,
    `<div class="card">Evictions<b>${t.evictions}</b></div>`,
    o.lfs
      ? `<div class="card">LFS objects<b>${o.lfs.objects}</b>${e(humanBytes(o.lfs.bytes))}, ${
        e(percent(o.lfs.hitRatio))
      } from the store</div>`
      : "",
    o.mirrors
      ? `<div class="card">Mirror answers<b>${o.mirrors.answers}</b>${
        e(humanBytes(o.mirrors.bytes))
      } not sent by the origin; ${o.mirrors.updates} updates, ${o.mirrors.layers} snapshot layers (${
        e(humanBytes(o.mirrors.layerBytes))
      }) packed here, ${o.mirrors.discards} discarded; ${
        e(humanBytes(o.mirrors.diskBytes))
      } on disk</div>`
      : "",
  ].join("");
  const mirrorColumn = o.mirrors !== undefined;
  const rows = o.repositories.map((r) => {
    const last = r.lastBuild;
    const build = last
      ? `${timeHtml(last.finishedAt ?? last.startedAt)}${
        last.durationSeconds === null ? " (running)" : ` (${e(humanSeconds(last.durationSeconds))})`
      }`
      : "–";
    return `<tr><td class="path">${e(r.path)}</td>` +
      `<td><span class="st ${e(r.state)}">${e(r.state)}</span>${
        r.lastError ? ` <span class="err" title="${e(r.lastError)}">failed</span>` : ""
      }</td>` +
      `<td class="n">${r.ageSeconds === null ? "–" : e(humanSeconds(r.ageSeconds))}</td>` +
      `<td class="n">${r.packs}</td><td class="n">${e(humanBytes(r.bytes))}</td>` +
      `<td>${build}</td><td class="n">${r.builds}</td>` +
      `<td class="n">${r.fetches}</td><td class="n">${e(percent(r.hitRatio))}</td>` +
      `<td class="n">${e(humanBytes(r.originBytesSaved))}</td>` +
      (mirrorColumn
        ? `<td>${
          r.mirror && r.mirror.state !== "none"
            ? `${e(humanBytes(r.mirror.bytes))}, ${
              r.mirror.state === "updating" ? "updating" : "updated"
            } ${timeHtml(r.mirror.updatedAt)}`
            : "–"
        }</td>`
        : "") +
      `<td>${timeHtml(r.lastClonedAt)}</td></tr>`;
  }).join("\n");
  const failures = o.recentFailures.length === 0
    ? `<p class="sub">None.</p>`
    : `<table><tr><th>Repository</th><th>When</th><th>Error</th></tr>${
      o.recentFailures.map((f) =>
        `<tr><td class="path">${e(f.path)}</td><td>${timeHtml(f.at)}</td>` +
        `<td class="err">${e(f.error)}</td></tr>`
      ).join("")
    }</table>`;
  const more = o.notListed ? `<p class="sub">${o.notListed} more not listed.</p>` : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>gitedge</title><style>${STYLE}</style></head>
<body>
<h1>gitedge</h1>
<p class="sub">As of ${e(o.generatedAt)}${
    s ? ` · store measured ${e(s.measuredAt)}` : ""
  } · also as JSON at <code>/_edge/repos</code></p>
<div class="cards">${cards}</div>
<h2>Repositories</h2>
${
    o.repositories.length === 0
      ? `<p class="sub">No repository yet: one appears after its first clone.</p>`
      : `<table>
<tr><th>Repository</th><th>Snapshot</th><th>Age</th><th>Packs</th><th>Bytes</th><th>Last build</th><th>Builds</th><th>Fetches</th><th>Hit ratio</th><th>Origin bytes saved</th>${
        mirrorColumn ? "<th>Mirror</th>" : ""
      }<th>Last cloned</th></tr>
${rows}
</table>`
  }
${more}
<h2>Recent failures</h2>
${failures}
</body></html>
`;
}
