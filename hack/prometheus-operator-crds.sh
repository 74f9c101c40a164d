#!/usr/bin/env bash
# Fetches the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs,
# which test/manifests installs in its control plane before it checks the
# optional monitoring objects (manifests/monitoring, charts/metactl) against
# the API server.
#
# Usage:
#   hack/prometheus-operator-crds.sh   print the absolute path of a folder holding the two CRDs' YAML
#
# The CRDs come from the Go module proxy, in the module
# github.com/prometheus-operator/prometheus-operator at the version below
# (folder example/prometheus-operator-crd/, as its release ships them),
# checked against the Go checksum database like any module. About 4 MB
# downloaded once on a cold machine; instant after.
# Progress goes to stderr; stdout carries only the path. Concurrent callers
# are serialised with flock; a finished folder is never rewritten, and a
# half-written one is never visible under the final name.
set -euo pipefail

VERSION=0.85.0
module=github.com/prometheus-operator/prometheus-operator
files=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)

log() { echo "prometheus-operator-crds: $*" >&2; }

cache=${METACTL_PROMETHEUS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metactl/prometheus-operator-crds}
out=$cache/v$VERSION

complete() {
  local f
  for f in "${files[@]}"; do [ -s "$out/$f" ] || return 1; done
}

if complete; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
log "waiting for the lock $cache/.lock"
flock 9
if complete; then # another caller fetched them while we waited
  echo "$out"
  exit 0
fi

work=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "downloading $module@v$VERSION from the Go module proxy"
# Outside any module (and workspace), so that no go.mod or go.sum changes.
dir=$(cd "$work" && GOWORK=off GOFLAGS= go mod download -json "$module@v$VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { log "go mod download gave no folder for $module@v$VERSION"; exit 1; }
for f in "${files[@]}"; do
  src=$dir/example/prometheus-operator-crd/$f
  [ -f "$src" ] || { log "$module@v$VERSION has no example/prometheus-operator-crd/$f"; exit 1; }
  cp "$src" "$work/$f"
done
chmod 755 "$work"
chmod 644 "$work"/*.yaml
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
log "CRDs in $out"
echo "$out"
