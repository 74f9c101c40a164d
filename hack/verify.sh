#!/usr/bin/env bash
# Fails when generated files are stale, code is not gofmt'ed, imports are not
# in three groups (standard library, other modules, metactl's own: run
# make fmt), or go vet or staticcheck complains (gci and staticcheck are
# pinned in hack/tools/go.mod). Generation runs in a copy of the tree, so the
# work tree is never modified.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

status=0
GCI_SECTIONS="-s standard -s default -s prefix(github.com/metactl/metactl)"
unformatted=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
  echo "verify: not gofmt'ed (run gofmt -w):" >&2
  echo "$unformatted" >&2
  status=1
fi

ungrouped=$(go tool -modfile=hack/tools/go.mod gci list $GCI_SECTIONS --skip-generated $(git ls-files --cached --others --exclude-standard '*.go'))
if [ -n "$ungrouped" ]; then
  echo "verify: imports not in three groups (run make fmt):" >&2
  echo "$ungrouped" >&2
  status=1
fi

# Both builds: tests that need a control plane are in files built only
# with -tags integration (make test), and plain go test builds the rest,
# which must compile without them.
go vet ./...
go vet -tags integration ./...
if ! go tool -modfile=hack/tools/go.mod staticcheck -tags integration ./...; then
  echo "verify: staticcheck found the problems above" >&2
  status=1
fi

copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
git ls-files --cached --others --exclude-standard -z | xargs -0 cp --parents -t "$copy"
make -C "$copy" --no-print-directory generate >/dev/null
for path in manifests/crds pkg/apis charts/metactl/crds charts/metactl/files; do
  if ! diff -r "$path" "$copy/$path" >/dev/null; then
    echo "verify: $path is stale; run make generate:" >&2
    diff -r "$path" "$copy/$path" >&2 || true
    status=1
  fi
done
[ "$status" = 0 ] && echo "verify: ok"
exit "$status"
