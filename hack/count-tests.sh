#!/usr/bin/env bash
# Counts the reconciler's test functions (func TestXxx; subtests and table
# rows not counted) per package, and how many of them run without an API
# server: those that plain `go test` builds (no -tags integration) in a
# package whose TestMain, as built without the tag, does not start a
# control plane (testenv.Main). `make test` builds with -tags integration
# and so runs every test counted here.
#
#   hack/count-tests.sh            # the reconciler's packages
#   hack/count-tests.sh ./pkg/...  # any packages
#
# It reads files only (go list and grep): nothing is built or run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ $# -eq 0 ]; then
  set -- ./pkg/composite ./pkg/decorator ./pkg/dynamic/children ./internal/related ./internal/manager ./internal/engine
fi

# files PKG TAGS: the package's test files as go test builds them with TAGS.
files() {
  go list -tags "$2" -f '{{$d := .Dir}}{{range .TestGoFiles}}{{$d}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$d}}/{{.}} {{end}}' "$1"
}
# tests FILES...: the test functions declared in them.
tests() {
  [ $# -eq 0 ] && { echo 0; return; }
  grep -hE '^func Test[^a-z]' "$@" | grep -vc '^func TestMain(' || true
}

printf '%-28s %6s %18s %s\n' package tests "no API server" "plain go test starts a control plane"
total=0 fast=0
for pkg in $(go list "$@"); do
  # shellcheck disable=SC2046 # one word per file
  all=$(tests $(files "$pkg" integration))
  # shellcheck disable=SC2046
  plain=$(files "$pkg" "")
  starts=no
  # shellcheck disable=SC2086
  if [ -n "$plain" ] && grep -q 'testenv\.Main(' $plain; then
    starts=yes
    noapi=0
  else
    # shellcheck disable=SC2086
    noapi=$(tests $plain)
  fi
  [ "$all" -eq 0 ] && continue
  printf '%-28s %6d %18d %s\n' "${pkg#github.com/metactl/metactl/}" "$all" "$noapi" "$starts"
  total=$((total + all)) fast=$((fast + noapi))
done
printf '%-28s %6d %18d\n' total "$total" "$fast"
