#!/usr/bin/env bash
# Builds the control-plane binaries that metactl's tests and `metactl dev` run:
# etcd, kube-apiserver, kube-controller-manager and kubectl, plus, for
# `metactl dev` only, kube-scheduler and kwok (the node simulator that makes
# Pods Running and Ready without containers), from the Go module proxy, once,
# into a versioned cache folder outside the repository.
#
# Usage:
#   hack/testenv.sh          build if missing; print the folder's absolute path on stdout
#   hack/testenv.sh regen    rewrite hack/testenv/*/go.mod and go.sum for the versions below
#
# Progress goes to stderr; stdout carries only the path, so callers can do
#   export KUBEBUILDER_ASSETS="$(hack/testenv.sh)"
#
# The builds happen in three small modules committed under hack/testenv/ so
# that neither k8s.io/kubernetes (whose go.mod needs a replace line per staging
# module), etcd (which drags grpc/otel upgrades) nor kwok enters metactl's own
# go.mod.
# Concurrent callers are serialised with flock; a finished folder is never
# rebuilt, and a half-built one is never visible under the final name.
set -euo pipefail

K8S_VERSION=1.36.3
ETCD_VERSION=3.6.16
KWOK_VERSION=0.8.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
modules=$here/testenv
binaries=(etcd kube-apiserver kube-controller-manager kubectl kube-scheduler kwok)

log() { echo "testenv: $*" >&2; }

regen() {
  log "writing $modules/etcd/go.mod for etcd v$ETCD_VERSION"
  (
    cd "$modules/etcd"
    rm -f go.mod go.sum
    go mod init metactl.local/testenv/etcd >/dev/null 2>&1
    go mod edit -go=1.26
    go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
    go mod edit -tool=go.etcd.io/etcd/server/v3
    go mod tidy >&2
  )
  log "writing $modules/kubernetes/go.mod for k8s.io/kubernetes v$K8S_VERSION"
  (
    cd "$modules/kubernetes"
    rm -f go.mod go.sum
    go mod init metactl.local/testenv/kubernetes >/dev/null 2>&1
    go mod edit -go=1.26
    local upstream
    upstream=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    [ -f "$upstream" ] || { log "cannot find go.mod of k8s.io/kubernetes@v$K8S_VERSION"; exit 1; }
    go mod edit -require="k8s.io/kubernetes@v$K8S_VERSION"
    # Every staging module that upstream replaces with ./staging/... is mapped to
    # its published release v0.<minor>.<patch>.
    local staging
    staging=$(awk '/=> \.\/staging\// { print ($1 == "replace" ? $2 : $1) }' "$upstream" | sort -u)
    [ -n "$staging" ] || { log "no staging replace lines found in $upstream"; exit 1; }
    local m
    for m in $staging; do
      go mod edit -replace="$m=$m@v0.${K8S_VERSION#1.}"
    done
    for m in kube-apiserver kube-controller-manager kubectl kube-scheduler; do
      go mod edit -tool="k8s.io/kubernetes/cmd/$m"
    done
    go mod tidy >&2
  )
  log "writing $modules/kwok/go.mod for sigs.k8s.io/kwok v$KWOK_VERSION"
  (
    cd "$modules/kwok"
    rm -f go.mod go.sum
    go mod init metactl.local/testenv/kwok >/dev/null 2>&1
    go mod edit -go=1.26
    go get "sigs.k8s.io/kwok@v$KWOK_VERSION" >&2
    go mod edit -tool=sigs.k8s.io/kwok/cmd/kwok
    go mod tidy >&2
  )
}

if [ "${1:-}" = regen ]; then
  regen
  exit 0
fi

gover=$(go env GOVERSION)
cache=${METACTL_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metactl/testenv}
out=$cache/k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_${gover}

complete() {
  local b
  for b in "${binaries[@]}"; do [ -x "$out/$b" ] || return 1; done
  [ -f "$out/kwok-stages.yaml" ]
}

if complete; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -n 9; then
  # Another caller (a test run, another metactl dev) is building them:
  # say so, since the wait can be as long as a build.
  log "another build of the control-plane binaries is running (it holds $cache/.lock): waiting for it to finish, then using what it built"
  flock 9
fi
if complete; then # another caller built it while we waited
  echo "$out"
  exit 0
fi

work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
export CGO_ENABLED=0
# The build uses each module's go.mod and go.sum only, whatever GOFLAGS or
# go.work the caller has (-mod=vendor, a workspace, VCS stamping that needs
# a working git would each break it).
export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"

log "building etcd v$ETCD_VERSION (about 1 minute on a cold machine)"
(cd "$modules/etcd" && go build -trimpath -ldflags "-s -w" -o "$work/etcd" go.etcd.io/etcd/server/v3)

version_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
  version_flags+=" -X $pkg.gitTreeState=clean"
done
log "building kube-apiserver, kube-controller-manager, kube-scheduler and kubectl v$K8S_VERSION (about 8 minutes on a cold machine)"
(cd "$modules/kubernetes" && go build -trimpath -ldflags "-s -w$version_flags" -o "$work/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)

log "building kwok v$KWOK_VERSION (about 1 minute on a cold machine)"
(cd "$modules/kwok" && go build -trimpath -ldflags "-s -w" \
  -o "$work/kwok" sigs.k8s.io/kwok/cmd/kwok)
# The kwok binary has no default behaviour: its stages (a node becomes
# Ready and heartbeats with a Lease; a Pod becomes Running and Ready, a
# Pod whose containers all belong to a Job completes, a deleted Pod goes)
# are the ones its release ships as "fast", from the same module.
kwokdir=$(cd "$modules/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
  pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  echo "---"
  cat "$kwokdir/kustomize/stage/$f"
done >"$work/kwok-stages.yaml"

chmod 755 "$work"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
log "built in $((SECONDS - start))s into $out"
echo "$out"
