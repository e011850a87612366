#!/usr/bin/env bash
# Installs the gitedge client for a CI job (the GitHub action runs it) and prints the path of the
# installed `gitedge` on its last line. Configured by environment variables:
#
#   GITEDGE_PACKAGE  where the package comes from: a tarball's path or URL (what
#                    `edge/npm/build.ts --pack` writes, e.g. attached to a release), or an npm
#                    spec once the name is published. Empty (default): built from the checkout
#                    this script belongs to, with Deno 2.9.6 from npm.
#   GITEDGE_PREFIX   the npm prefix to install into (default: $RUNNER_TEMP/gitedge-client, or
#                    under $TMPDIR); the command is PREFIX/bin/gitedge
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prefix=${GITEDGE_PREFIX:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/gitedge-client}
package=${GITEDGE_PACKAGE:-}
if [[ -z $package ]]; then
  root=$(cd "$here/../.." && pwd)
  # --no-config: build.ts needs none of the checkout's npm packages (its bundle step names its
  # own config), so nothing of the test stack is fetched.
  package=$(npx --yes deno@2.9.6 run --no-config --allow-all "$root/edge/npm/build.ts" \
    --pack --out "$prefix/build" | tail -n 1)
fi
npm install --global --prefix "$prefix" --no-audit --no-fund --loglevel=error "$package" >&2
echo "$prefix/bin/gitedge"
