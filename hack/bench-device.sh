#!/usr/bin/env bash
# The many-core benchmark (docs/performance.md, "On a many-core machine"),
# in two steps, for a machine lent without Go, kubectl or a network:
#
#   hack/bench-device.sh pack          here: build metactl and bin/bench
#                                      stripped, copy etcd and kube-apiserver
#                                      from the hack/testenv.sh cache, and
#                                      pack them into .device/bench.tar.xz
#                                      (about 40 MB; .device/ is ignored)
#   OUT=DIR hack/bench-device.sh run   there, from the checkout: unpack, and
#                                      run the benchmark at N=2,000 (3
#                                      rounds) and N=10,000 (1 round), metactl
#                                      with default flags side by side with
#                                      the old default (--client-qps=2000
#                                      --client-burst=4000) in the same
#                                      rounds; results, logs and profiles
#                                      under $OUT
#
# BENCH_NS overrides the sizes (default "2000:3 10000:1", N:rounds), for a
# check at a small N first: BENCH_NS="200:1" OUT=/tmp/o hack/bench-device.sh run.
# Without kube-controller-manager the delete phase is left out (it needs
# the garbage collector); the cache phase is left out to save the lent
# minutes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=.device

case "${1:-}" in
pack)
  assets=$(hack/testenv.sh)
  rm -rf "$dir" && mkdir -p "$dir/pack/bin" "$dir/pack/assets"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/pack/bin/metactl" ./cmd/metactl
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/pack/bin/bench" ./test/bench
  cp "$assets/etcd" "$assets/kube-apiserver" "$dir/pack/assets/"
  git rev-parse --short=12 HEAD >"$dir/pack/commit"
  tar -C "$dir/pack" -cf - . | xz -9 -T0 >"$dir/bench.tar.xz"
  rm -rf "$dir/pack"
  ls -l "$dir/bench.tar.xz"
  ;;
run)
  : "${OUT:?set OUT to the folder for the results}"
  mkdir -p "$OUT"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  xz -dc "$dir/bench.tar.xz" | tar -C "$work" -xf -
  export KUBEBUILDER_ASSETS=$work/assets
  {
    echo "commit $(cat "$work/commit")"
    echo "cpus $(nproc)"
    grep -m1 'model name' /proc/cpuinfo || true
    free -g | head -2
  } >"$OUT/machine.txt"
  status=0
  for spec in ${BENCH_NS:-2000:3 10000:1}; do
    n=${spec%%:*} runs=${spec##*:}
    "$work/bin/bench" -metactl "$work/bin/metactl" -n "$n" -runs "$runs" \
      -phases limit,create,update -limit-writers 16,64,256 -workers 64 \
      -variant "qps2000=--client-qps=2000 --client-burst=4000" \
      -label "device-n$n" -out "$OUT/device-n$n.json" >"$OUT/device-n$n.txt" 2>"$OUT/device-n$n.log" || status=$?
    tail -5 "$OUT/device-n$n.txt"
  done
  exit $status
  ;;
*)
  echo "usage: hack/bench-device.sh pack | OUT=DIR hack/bench-device.sh run" >&2
  exit 2
  ;;
esac
