#!/usr/bin/env bash
# Bench-only: git 2.55 (the vendored source) with the seed patch applied, the one that adds
# `fetch.packfileURIThreads` (parallel packfile-URI downloads in git fetch/clone), so that
# bench/edge_uris.ts can run the seed's own git next to gitedge clone. Never used by tests or CI.
#
#   GIT_SEED=$(bench/seed_git.sh)      # ~5-10 min of both cores the first time; prints the path
#   npx --yes deno@2.9.6 run -A bench/edge_uris.ts --seed-git "$GIT_SEED"
#
# The source is ../shared/vendor/git-2.55.0.618.tar.gz (the patch's base commit, 1a3e64c6c4) and
# the patch ../shared/seeds/000_*.txt, both outside this repository; override with
# GITEDGE_GIT_TARBALL / GITEDGE_SEED_PATCH. The build runs niced. Build packages as in
# ../shared/tools/modern-git.sh (make gcc libcurl4-gnutls-dev libexpat1-dev zlib1g-dev libssl-dev).
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/gitedge/git-seed-<first 12 hex of the patch's sha256>;
# one build at a time (flock), later calls print the path at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shared=$(cd "$here/../.." && pwd)/shared
[[ -d $shared ]] || shared=/work/shared
ver=2.55.0.618
tarball=${GITEDGE_GIT_TARBALL:-$shared/vendor/git-$ver.tar.gz}
patch=${GITEDGE_SEED_PATCH:-}
if [[ -z $patch ]]; then
  for f in "$shared"/seeds/000_*.txt; do patch=$f; done
fi
for f in "$tarball" "$patch"; do
  [[ -f $f ]] || { echo "seed_git.sh: missing $f" >&2; exit 1; }
done
sum=$(sha256sum "$patch" | cut -c1-12)
prefix=${XDG_CACHE_HOME:-$HOME/.cache}/gitedge/git-seed-$sum
if [[ -x $prefix/bin/git && -f $prefix/.complete ]]; then echo "$prefix/bin/git"; exit 0; fi
mkdir -p "$(dirname "$prefix")"
exec 9> "$prefix.lock"
flock 9
if [[ -x $prefix/bin/git && -f $prefix/.complete ]]; then echo "$prefix/bin/git"; exit 0; fi
for p in make gcc libcurl4-gnutls-dev libexpat1-dev zlib1g-dev libssl-dev; do
  dpkg -s "$p" > /dev/null 2>&1 || { echo "seed_git.sh: package $p is missing" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
cd "$work/git-$ver"
# The seed is a mail-formatted series (two patches, both touching fetch-pack.c); git apply reads
# the diffs out of it in order and ignores the prose around them.
git apply "$patch"
grep -q packfileURIThreads fetch-pack.c || { echo "seed_git.sh: patch did not apply" >&2; exit 1; }
echo "$ver-seed-$sum" > version
rm -rf "$prefix"
if ! nice -n 10 make -j"$(nproc)" prefix="$prefix" NO_TCLTK=1 NO_GETTEXT=1 NO_PERL=1 \
  NO_PYTHON=1 install > "$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log" >&2
  echo "seed_git.sh: building git $ver with the seed patch failed" >&2
  exit 1
fi
touch "$prefix/.complete"
echo "$prefix/bin/git"
