#!/bin/sh
# `deno task worker:dev`: `wrangler dev` (the pinned version) as the process the task runs, so a
# signal to the task (a supervisor's SIGTERM, Ctrl-C) reaches wrangler, and wrangler stops its
# workerd. `npx` only finds wrangler here: left in between, it would die on SIGTERM and leave
# wrangler and workerd running. VSCODE_INSPECTOR_OPTIONS keeps wrangler's DevTools proxy out
# (README, "Locally").
set -eu
wrangler=$(npx --yes --package wrangler@4.86.0 -c 'command -v wrangler')
VSCODE_INSPECTOR_OPTIONS=gitedge exec "$wrangler" dev "$@"
