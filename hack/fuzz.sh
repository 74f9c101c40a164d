#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s).
# A failing input is written under the package's testdata/fuzz, where
# `go test` replays it from then on, and fails this script. A fuzz run that
# fails without writing an input (the target does not build, its seed corpus
# fails, or the fuzzing engine itself gave up, e.g. a worker killed on a
# loaded machine) fails it too: the target was not fuzzed for FUZZTIME.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${FUZZTIME:-10s}
status=0
for file in $(grep -rl --include='*_test.go' '^func Fuzz' pkg internal); do
  dir=$(dirname "$file")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    echo "fuzz: ./$dir $target for $fuzztime"
    before=$(find "$dir/testdata/fuzz/$target" -type f 2>/dev/null | sort)
    if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "./$dir"; then
      after=$(find "$dir/testdata/fuzz/$target" -type f 2>/dev/null | sort)
      if [ "$before" != "$after" ]; then
        echo "fuzz: $target found a failing input:" >&2
        comm -13 <(echo "$before") <(echo "$after") >&2
        status=1
      else
        echo "fuzz: $target failed without writing a failing input (see its output above): not fuzzed for $fuzztime" >&2
        status=1
      fi
    fi
  done
done
exit $status
