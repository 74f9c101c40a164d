#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s).
# New inputs that fail are written under the package's testdata/fuzz, where
# `go test` replays them from then on.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${FUZZTIME:-10s}
for file in $(grep -rl --include='*_test.go' '^func Fuzz' pkg internal); do
  pkg=./$(dirname "$file")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    echo "fuzz: $pkg $target for $fuzztime"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"
  done
done
