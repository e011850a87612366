/** Mutants: who gets what through the edge (docs/access.md, test/edge/deno/access_test.ts). */
import type { Mutant } from "./mutant.ts";

const ACCESS_TEST = "test/edge/deno/access_test.ts";

export const ACCESS_MUTANTS: Mutant[] = [
  {
    // An ls-refs (or info/refs) the origin answers renews the memo again: the confused deputy
    // for origins that list refs to anyone, and revocation past --auth-ttl.
    name: "access/ls-refs-renews-memo",
    file: "src/proxy/origin/forwarding.ts",
    from:
      "  if (status === 401 || status === 403) ctx.authMemo.forget(credentialKey(ctx, request, repo));",
    to:
      "  if (status === 200) ctx.authMemo.remember(credentialKey(ctx, request, repo), ctx.deps.clock.now());\n  if (status === 401 || status === 403) ctx.authMemo.forget(credentialKey(ctx, request, repo));",
    tests: [ACCESS_TEST],
    filter: "/guards fetch|revocation/",
  },
  {
    name: "access/probe-ignores-refusal",
    file: "src/proxy/origin/fetch_probe.ts",
    from: "  if (origin.status === 401 || origin.status === 403) {",
    to: '  if (origin.status === 401 || origin.status === 403) {\n    return "authorised";',
    tests: [ACCESS_TEST],
    filter: "/guards fetch|bundle-list|incremental/",
  },
  {
    name: "access/probe-err-authorises",
    file: "src/proxy/origin/fetch_probe.ts",
    from: '  if (!served) return "ask-origin";',
    to: '  if (!served) return "authorised";',
    tests: ["test/proxy/origin/fetch_probe_test.ts"],
  },
  {
    name: "access/stream-without-probe",
    file: "src/proxy/fetch/git_routes.ts",
    from:
      '      if (verdict instanceof Response) return verdict;\n      if (verdict === "authorised") inputs.recentlyAuthorised = true;',
    to: "      inputs.recentlyAuthorised = true;",
    tests: [ACCESS_TEST],
    filter: "/guards fetch/",
  },
  {
    name: "access/cache-before-authorisation",
    file: "src/proxy/fetch/cached_fetch.ts",
    from: '  if (verdict instanceof Response) return verdict;\n  if (verdict !== "authorised") {',
    to:
      '  if (verdict instanceof Response && !await ctx.deps.store.head(entryKey(repo.id, cacheKey(repo.id, req, args, "-")))) return verdict;\n  if (verdict !== "authorised") {',
    tests: [ACCESS_TEST],
    filter: "/incremental/",
  },
  {
    name: "access/bundle-list-404-before-origin",
    file: "src/proxy/bundles/bundle_answer.ts",
    from: "  const servable = await servableBundles(ctx, repo);\n  const verdict",
    to:
      '  const servable = await servableBundles(ctx, repo);\n  if (!servable) return new Response("none", { status: 404 });\n  const verdict',
    tests: [ACCESS_TEST],
    filter: "/bundle-list/",
  },
  {
    name: "access/metrics-named-without-token",
    file: "src/proxy/ops/repo_metrics.ts",
    from: "  const named = scrape.perRepository ? all.slice(0, top) : [];",
    to: "  const named = all.slice(0, top);",
    tests: [ACCESS_TEST],
    filter: "/metrics name/",
  },
  {
    name: "access/metrics-any-bearer",
    file: "src/proxy/app.ts",
    from:
      '      isAdmin(c.req.header("authorization"), token, { basic: true });\n    return c.text(await metrics.renderAll',
    to:
      '      (c.req.header("authorization") ?? "").startsWith("Bearer ");\n    return c.text(await metrics.renderAll',
    tests: [ACCESS_TEST],
    filter: "/metrics name/",
  },
  {
    name: "access/repos-store-to-anyone",
    file: "src/proxy/ops/operator_page.ts",
    from: "    store: opts.visible ? null : {",
    to: "    store: false ? null : {",
    tests: [ACCESS_TEST],
    filter: "/metrics name/",
  },
  {
    name: "access/repos-not-listed-to-anyone",
    file: "src/proxy/ops/operator_page.ts",
    from: "    notListed: opts.visible ? null : records.length - repositories.length,",
    to: "    notListed: records.length - repositories.length,",
    tests: [ACCESS_TEST],
    filter: "/metrics name/",
  },
];

/** A removed secret (issue #35, failure 8): refreshes after a force push, and the purge. */
export const PURGE_MUTANTS: Mutant[] = [
  {
    name: "access/refresh-layers-on-orphans",
    file: "src/proxy/snapshots/snapshot.ts",
    from: '(previous.objectFormat ?? "sha1") === objectFormat && wants.length > 0 && !orphaned;',
    to: '(previous.objectFormat ?? "sha1") === objectFormat && wants.length > 0;',
    tests: [ACCESS_TEST],
    filter: "/secret removed/",
  },
  {
    name: "access/orphans-keep-cached-answers",
    file: "src/proxy/snapshots/snapshot.ts",
    from: "    if (orphaned) await this.#deleteUnder(cachePrefix(repo.id));\n",
    to: "",
    tests: [ACCESS_TEST],
    filter: "/secret removed/",
  },
  {
    name: "access/orphan-count-ignored",
    file: "src/proxy/origin/origin.ts",
    from: "    return objects > 0;",
    to: "    return false;",
    tests: ["test/proxy/origin/origin_test.ts"],
  },
  {
    name: "access/purge-without-token",
    file: "src/proxy/app.ts",
    from:
      '    if (!isAdmin(c.req.header("authorization"), token)) {\n      return c.json({ error: "admin token required" }, 401);\n    }\n    const repo = repoFromEdgePath(c, "/_edge/purge/", ctx);',
    to: '    const repo = repoFromEdgePath(c, "/_edge/purge/", ctx);',
    tests: [ACCESS_TEST],
    filter: "/secret removed/",
  },
];
