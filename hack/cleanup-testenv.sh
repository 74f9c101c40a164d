#!/usr/bin/env bash
# Stops control-plane processes that a test binary leaked and removes their
# temporary folders. A leaked process is one started from the testenv cache
# whose parent is gone (re-parented to init or a subreaper with no tie to a
# test); a control plane that a running test or `metactl dev` owns is left
# alone. Safe to run at any time.
set -uo pipefail

assets=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && hack/testenv.sh 2>/dev/null) || exit 0
killed=0
for pid in $(pgrep -f "^$assets/(etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok)( |$)" || true); do
  ppid=$(ps -o ppid= -p "$pid" | tr -d ' ')
  parent=$(ps -o comm= -p "$ppid" 2>/dev/null)
  case "$parent" in
    *.test|metactl|metactl-dev|go) continue ;; # still owned
  esac
  kill -9 "$pid" 2>/dev/null && killed=$((killed + 1))
done
[ "$killed" -gt 0 ] && echo "cleanup-testenv: stopped $killed leaked control-plane processes" >&2

# envtest's temporary folders that no running process refers to.
in_use=$(ps -eo args= | grep -o '/tmp/k8s_test_framework_[0-9]*' | sort -u)
for dir in /tmp/k8s_test_framework_* /tmp/metactl-testenv-*; do
  [ -e "$dir" ] || continue
  grep -qxF "$dir" <<<"$in_use" && continue
  rm -rf "$dir"
done
# internal/controlplane's folders, named after their owner's PID.
for dir in "${TMPDIR:-/tmp}"/metactl-cp-*; do
  [ -e "$dir" ] || continue
  pid=${dir##*/metactl-cp-}
  pid=${pid%%-*}
  kill -0 "$pid" 2>/dev/null || rm -rf "$dir"
done
exit 0
