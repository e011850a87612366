#!/usr/bin/env bash
# gitedge's CI checkout, shared by the GitHub action (github/action.yml) and the GitLab template
# (gitlab/gitedge.gitlab-ci.yml). Configured by environment variables:
#
#   GITEDGE_EDGE        the edge's URL for the origin host (multi-origin mode), e.g.
#                       https://git-edge.example.com/github.com            (required)
#   GITEDGE_REPOSITORY  the repository's path on the origin, e.g. team/app   (required)
#   GITEDGE_MODE        clone (default): `gitedge clone`, packs by URI in parallel;
#                       configure: only route this runner's stock git through the edge
#                       (url.insteadOf and fetch.uriProtocols, global config), for a later
#                       checkout step; needs GITEDGE_ORIGIN
#   GITEDGE_ORIGIN      the origin's base URL, e.g. https://github.com (configure mode)
#   GITEDGE_REF         a commit, branch or tag to check out (clone mode; default: HEAD)
#   GITEDGE_DEPTH       history depth, 0 for all (default 1)
#   GITEDGE_FILTER      a partial-clone filter, e.g. blob:none
#   GITEDGE_SUBMODULES  true or recursive: check out submodules too
#   GITEDGE_PATH        where to check out (default .)
#   GITEDGE_JOBS        parallel pack downloads (default 8)
#   GITEDGE_TOKEN       a token for the edge (passed to the origin), given to git and gitedge by a
#                       credential helper in the environment: never written to disk
#   GITEDGE_USERNAME    the token's user name (default x-access-token)
#   GITEDGE_COMMAND     how to run gitedge (default: gitedge on PATH)
set -euo pipefail

case ${1:-} in
-h | --help)
  # The header above, without its comment marks: the variables this script reads.
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit 0
  ;;
esac

: "${GITEDGE_EDGE:?set GITEDGE_EDGE to the edge URL for the origin host}"
edge=${GITEDGE_EDGE%/}
mode=${GITEDGE_MODE:-clone}
# scheme://host of the edge: what credentials and URI protocols are keyed by.
edge_host=$(sed -E 's#^([a-z]+://[^/]+).*#\1#' <<<"$edge")
scheme=${edge_host%%:*}

if [[ -n ${GITEDGE_TOKEN:-} ]]; then
  export GITEDGE_TOKEN GITEDGE_USERNAME=${GITEDGE_USERNAME:-x-access-token}
  n=${GIT_CONFIG_COUNT:-0}
  export "GIT_CONFIG_KEY_$n=credential.$edge_host.helper"
  # shellcheck disable=SC2016 # expanded by the helper's shell, from the environment
  export "GIT_CONFIG_VALUE_$n="'!f() { test "$1" = get && echo "username=$GITEDGE_USERNAME" && echo "password=$GITEDGE_TOKEN"; }; f'
  export GIT_CONFIG_COUNT=$((n + 1))
fi

case $mode in
configure)
  : "${GITEDGE_ORIGIN:?configure mode needs GITEDGE_ORIGIN, the base URL of the origin}"
  git config --global "url.$edge/.insteadOf" "${GITEDGE_ORIGIN%/}/"
  git config --global fetch.uriProtocols "$scheme"
  echo "gitedge: git fetches ${GITEDGE_ORIGIN%/}/ through $edge/"
  ;;
clone)
  : "${GITEDGE_REPOSITORY:?set GITEDGE_REPOSITORY to the repository path on the origin}"
  repo=${GITEDGE_REPOSITORY#/}
  args=(clone --jobs "${GITEDGE_JOBS:-8}")
  depth=${GITEDGE_DEPTH:-1}
  [[ $depth != 0 ]] && args+=(--depth "$depth")
  [[ -n ${GITEDGE_FILTER:-} ]] && args+=(--filter "$GITEDGE_FILTER")
  case ${GITEDGE_SUBMODULES:-false} in
  true | recursive) args+=(--recurse-submodules) ;;
  esac
  # A shallow checkout fetches the one commit; full history fetches every ref, as
  # actions/checkout does with fetch-depth 0, so the edge can hand out its snapshot's packs (they
  # go only to fetches that want all its tips), then the commit is checked out.
  ref=${GITEDGE_REF:-}
  [[ -n $ref && $depth != 0 ]] && args+=(--revision "$ref")
  [[ -n $ref && $depth == 0 ]] && args+=(--no-checkout)
  read -r -a command <<<"${GITEDGE_COMMAND:-gitedge}"
  dir=${GITEDGE_PATH:-.}
  "${command[@]}" "${args[@]}" "$edge/${repo%.git}.git" "$dir"
  if [[ -n $ref && $depth == 0 ]]; then
    # A branch is checked out as the clone has it: refs/heads/X is origin/X there.
    [[ $ref == refs/heads/* ]] && ref=refs/remotes/origin/${ref#refs/heads/}
    git -C "$dir" checkout -q --detach "$ref"
  fi
  ;;
*)
  echo "gitedge checkout: GITEDGE_MODE is clone or configure, not '$mode'" >&2
  exit 2
  ;;
esac
