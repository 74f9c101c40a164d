#!/usr/bin/env bash
# Builds hack/promql (a tiny PromQL checker on Prometheus's own parser, used
# by test/manifests to check the alert rules and the dashboard in
# manifests/monitoring) from the Go module proxy, once, into a cache folder
# outside the repository, and prints the binary's absolute path on stdout.
#
# Usage:
#   hack/promql.sh           build if missing; print the binary's path
#
# The tool is a module of its own (hack/promql/go.mod) so that Prometheus
# never enters metactl's go.mod; bump it with
#   (cd hack/promql && go get github.com/prometheus/prometheus@<version> && go mod tidy)
# The cache folder's name carries the Go version and a hash of the module's
# files, so a change to either builds a new binary. Concurrent callers are
# serialised with flock; a half-built binary is never visible under the
# final name. Progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module=$here/promql

log() { echo "promql: $*" >&2; }

gover=$(go env GOVERSION)
# The build uses this module's go.mod and go.sum only, whatever GOFLAGS or
# go.work the caller has (-mod=vendor, a workspace, VCS stamping that needs
# a working git would each break it).
export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"
sum=$(cat "$module/go.mod" "$module/go.sum" "$module"/*.go | sha256sum | cut -c1-12)
cache=${METACTL_PROMQL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metactl/promql}
out=$cache/${gover}_$sum/promql

if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
log "waiting for the build lock $cache/.lock"
flock 9
if [ -x "$out" ]; then # another caller built it while we waited
  echo "$out"
  exit 0
fi

work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
log "building the PromQL checker from $module (about a minute on a cold machine)"
(cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/promql" .)
mkdir -p "$(dirname "$out")"
mv "$work/promql" "$out"
log "built in $((SECONDS - start))s into $out"
echo "$out"
