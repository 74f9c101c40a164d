#!/usr/bin/env bash
# Builds the helm binary that test/manifests runs against charts/metactl,
# from the Go module proxy, once, into a versioned cache folder outside the
# repository.
#
# Usage:
#   hack/helm.sh          build if missing; print the binary's absolute path on stdout
#   hack/helm.sh regen    rewrite hack/helm/go.mod and go.sum for the version below
#
# Progress goes to stderr; stdout carries only the path, so callers can do
#   helm="$(hack/helm.sh)"
#
# The build happens in a small module committed under hack/helm/ so that
# Helm never enters metactl's own go.mod. On a cold machine: about 110 MB of
# module downloads (some 17 MB of them shared with the control plane that
# hack/testenv.sh builds) and 2 to 3 minutes of build on 2 cores; instant
# after.
# Concurrent callers are serialised with flock; a finished binary is never
# rebuilt, and a half-built one is never visible under the final name.
set -euo pipefail

HELM_VERSION=4.3.1

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module=$here/helm

log() { echo "helm: $*" >&2; }

if [ "${1:-}" = regen ]; then
  log "writing $module/go.mod for helm.sh/helm/v4 v$HELM_VERSION"
  cd "$module"
  rm -f go.mod go.sum
  go mod init metactl.local/helm >/dev/null 2>&1
  go mod edit -go=1.26
  go get "helm.sh/helm/v4@v$HELM_VERSION" >&2
  go mod edit -tool=helm.sh/helm/v4/cmd/helm
  go mod tidy >&2
  exit 0
fi

gover=$(go env GOVERSION)
# The build uses this module's go.mod and go.sum only, whatever GOFLAGS or
# go.work the caller has (-mod=vendor, a workspace, VCS stamping that needs
# a working git would each break it).
export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"
cache=${METACTL_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metactl/helm}
out=$cache/${HELM_VERSION}_${gover}

if [ -x "$out/helm" ]; then
  echo "$out/helm"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
log "waiting for the build lock $cache/.lock"
flock 9
if [ -x "$out/helm" ]; then # another caller built it while we waited
  echo "$out/helm"
  exit 0
fi

work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
export CGO_ENABLED=0

log "building helm v$HELM_VERSION (2 to 3 minutes on a cold machine)"
# The version Helm prints (`helm version`) is set at link time, as Helm's own
# Makefile does.
(cd "$module" && go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  -o "$work/helm" helm.sh/helm/v4/cmd/helm)

chmod 755 "$work"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
log "built in $((SECONDS - start))s into $out"
echo "$out/helm"
