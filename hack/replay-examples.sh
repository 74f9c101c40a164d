#!/usr/bin/env bash
# Replays each example's recorded hook calls (examples/LANG/NAME/recorded/)
# against the example's hook, run on this machine as a process, the way a
# hook author regression-tests a hook in CI: start the hook, run
# `metactl replay DIR --hook-url URL`, stop the hook.
#
# Usage: hack/replay-examples.sh [NAME...]   (default: every example with a
# recorded set). $METACTL is the metactl binary (default bin/metactl, which
# `make build` builds); extra `metactl replay` flags go in $REPLAY_FLAGS.
# Exit code: 0 when every answer is the same, else the highest exit code of
# `metactl replay` (2 differences or failed calls, 1 replay could not run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
metactl=${METACTL:-bin/metactl}
[ -x "$metactl" ] || { echo "replay-examples: $metactl not found; run make build (or set METACTL)" >&2; exit 1; }

hook_pid=
stop_hook() {
  if [ -n "$hook_pid" ]; then
    kill "$hook_pid" 2>/dev/null || true
    wait "$hook_pid" 2>/dev/null || true
    hook_pid=
  fi
}
trap stop_hook EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_listening PORT LOG: until the hook accepts connections, for up to
# 30 seconds; fails at once if it exits.
wait_listening() {
  local deadline=$((SECONDS + 30))
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    if ! kill -0 "$hook_pid" 2>/dev/null; then
      echo "the hook exited before listening:" >&2; cat "$2" >&2; return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "the hook did not listen on port $1 within 30s:" >&2; cat "$2" >&2; return 1
    fi
    sleep 0.1
  done
}

log=$(mktemp)
trap 'stop_hook; rm -f "$log"' EXIT
status=0
ran=0
for dir in examples/*/*/recorded; do
  [ -d "$dir" ] || continue
  example=${dir%/recorded}
  name=${example##*/}
  lang=${example#examples/}
  lang=${lang%%/*}
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
    continue
  fi
  case $lang in
    python) hook=(python3 "$example/hook.py") ;;
    js) hook=(node "$example/hook.js") ;;
    *) echo "replay-examples: $example: unknown language $lang" >&2; status=1; continue ;;
  esac
  echo "== $lang/$name"
  port=$(free_port)
  "${hook[@]}" --port "$port" >"$log" 2>&1 &
  hook_pid=$!
  if ! wait_listening "$port" "$log"; then
    stop_hook; status=1; continue
  fi
  rc=0
  # shellcheck disable=SC2086 # REPLAY_FLAGS is split on purpose
  "$metactl" replay "$dir" --hook-url "http://127.0.0.1:$port" ${REPLAY_FLAGS:-} || rc=$?
  stop_hook
  [ "$rc" -gt "$status" ] && status=$rc
  ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
  echo "replay-examples: no recorded set replayed${*:+ for $*}" >&2
  [ "$status" -gt 1 ] || status=1
fi
exit "$status"
