#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s).
# A failing input is written under the package's testdata/fuzz, where
# `go test` replays it from then on, and fails this script. A fuzz run that
# fails without writing an input (the target does not build, its seed corpus
# fails, or the fuzzing engine itself gave up, e.g. a worker killed on a
# loaded machine) fails it too: the target was not fuzzed for FUZZTIME.
# One exception is retried once: Go's fuzzing coordinator can fail a
# duration-bounded run with "context deadline exceeded" as FUZZTIME ends,
# having found nothing (a race in internal/fuzz, golang/go#75804, fixed in
# Go 1.27); the target is then fuzzed again for FUZZTIME, and a second
# failure of any kind fails this script.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${FUZZTIME:-10s}
status=0
for file in $(grep -rl --include='*_test.go' '^func Fuzz' pkg internal); do
  dir=$(dirname "$file")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    echo "fuzz: ./$dir $target for $fuzztime"
    before=$(find "$dir/testdata/fuzz/$target" -type f 2>/dev/null | sort)
    for try in 1 2; do
      out=$(mktemp)
      go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "./$dir" 2>&1 | tee "$out"
      code=${PIPESTATUS[0]}
      after=$(find "$dir/testdata/fuzz/$target" -type f 2>/dev/null | sort)
      deadline_race=0
      if [ "$code" -ne 0 ] && [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$out"; then
        deadline_race=1
      fi
      rm -f "$out"
      if [ "$code" -eq 0 ]; then
        break
      elif [ "$before" != "$after" ]; then
        echo "fuzz: $target found a failing input:" >&2
        comm -13 <(echo "$before") <(echo "$after") >&2
        status=1
        break
      elif [ "$deadline_race" = 1 ] && [ "$try" = 1 ]; then
        echo "fuzz: $target failed with Go's fuzzing deadline race (golang/go#75804), no input written: fuzzing it again" >&2
      else
        echo "fuzz: $target failed without writing a failing input (see its output above): not fuzzed for $fuzztime" >&2
        status=1
        break
      fi
    done
  done
done
exit $status
