#!/usr/bin/env bash
# Records each example's hook calls into examples/LANG/NAME/recorded/, the
# set that hack/replay-examples.sh (and make test) replays: for each
# example it runs `metactl dev --example NAME --record-dir DIR` (its own
# control plane, its sample applied), drives the example as its README
# does (the sample created, a change of the parent or of what the hook
# reads, the parent deleted) with kubectl, stops metactl dev, keeps the
# calls that got an answer, and checks that they replay the same against
# the example's hook.
#
# Usage: hack/record-examples.sh [NAME...]   (default: every example).
# Needs bin/metactl and bin/metactl-dev (make build) and the control-plane
# binaries (make testenv). About 20 seconds an example. Re-record after a
# change of an example's hook that changes its answers (or use
# `metactl replay --update`); commit the sets.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
metactl=$root/bin/metactl
[ -x "$metactl" ] && [ -x "$root/bin/metactl-dev" ] || { echo "record-examples: run make build first" >&2; exit 1; }
assets=$(hack/testenv.sh)
export PATH="$assets:$PATH" # kubectl matching the control plane

work=$(mktemp -d)
dev_pid=
stop_dev() {
  if [ -n "$dev_pid" ]; then
    kill -TERM "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
    dev_pid=
  fi
}
trap 'stop_dev; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# until SECONDS WHAT COMMAND...: runs COMMAND until it succeeds, for up to
# SECONDS.
until_ok() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "record-examples: timed out waiting for $what" >&2
      return 1
    fi
    sleep 0.2
  done
}

# jsonpath_is RESOURCE NAME JSONPATH VALUE [kubectl args]: the field equals VALUE.
jsonpath_is() {
  local resource=$1 name=$2 path=$3 want=$4
  shift 4
  [ "$(kubectl get "$resource" "$name" -o "jsonpath=$path" "$@" 2>/dev/null)" = "$want" ]
}

gone() { ! kubectl get "$@" >/dev/null 2>&1; }

count_is() { # count_is N RESOURCE [kubectl args]: N objects, none being deleted
  local want=$1
  shift
  [ "$(kubectl get "$@" -o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}x{{"\n"}}{{end}}{{end}}' | grep -c x)" = "$want" ]
}

# One function per example: drive it from its sample, applied by metactl
# dev, to its deletion.
scenario_hello-world() {
  until_ok 60 "the greeting" jsonpath_is configmap your-name-greeting '{.data.greeting}' 'Hello, World!'
  kubectl patch helloworld your-name --type merge -p '{"spec":{"who":"metactl"}}'
  until_ok 60 "the new greeting in the status" jsonpath_is helloworld your-name '{.status.greeting}' 'Hello, metactl!'
  kubectl delete helloworld your-name
  until_ok 60 "the ConfigMap deleted" gone configmap your-name-greeting
}

scenario_indexed-job() {
  until_ok 60 "3 pods" count_is 3 pods
  kubectl patch indexedjob print-index --type merge -p '{"spec":{"completions":5}}'
  until_ok 60 "5 pods" count_is 5 pods
  until_ok 60 "status: 5 completions" jsonpath_is indexedjob print-index '{.status.completions}' 5
  kubectl delete indexedjob print-index
  until_ok 60 "the pods deleted" count_is 0 pods
}

scenario_propagation() {
  until_ok 60 "a copy in team-b" kubectl get configmap app-settings -n team-b
  kubectl patch configmap app-settings -n default --type merge -p '{"data":{"color":"green"}}'
  until_ok 60 "the copy in team-a green" jsonpath_is configmap app-settings '{.data.color}' green -n team-a
  kubectl label namespace team-c example.metactl.io/app-settings=true
  until_ok 60 "a copy in team-c" kubectl get configmap app-settings -n team-c
  until_ok 60 "status: 3 copies" jsonpath_is configmappropagation app-settings '{.status.copies}' 3
  kubectl delete configmappropagation app-settings
  until_ok 60 "the copy in team-c deleted" gone configmap app-settings -n team-c
}

# stored_status_has NS TEXT: the namespace's metactl.io/status annotation
# (the hook's status, kept there for a built-in parent) contains TEXT.
stored_status_has() {
  kubectl get namespace "$1" -o 'jsonpath={.metadata.annotations.metactl\.io/status}' 2>/dev/null | grep -qF "$2"
}

scenario_namespace-defaults() {
  until_ok 60 "the RoleBinding in analytics" jsonpath_is rolebinding team-edit '{.subjects[0].name}' platform -n analytics
  until_ok 60 "shop's status: 3 defaults" stored_status_has shop '"defaults":3'
  kubectl annotate namespace shop example.metactl.io/team=payments --overwrite
  until_ok 60 "the RoleBinding in shop bound to payments" jsonpath_is rolebinding team-edit '{.subjects[0].name}' payments -n shop
  until_ok 60 "shop's previous team in its status" stored_status_has shop '"previousTeams":["shop-team"]'
  kubectl delete namespace analytics --wait=false
  until_ok 120 "namespace analytics deleted" gone namespace analytics
}

scenario_service-per-pod() {
  until_ok 60 "the Service on 8080" jsonpath_is service web-0 '{.spec.ports[0].port}' 8080
  kubectl annotate pod web-0 service-per-pod/port=9090 --overwrite
  until_ok 60 "the Service on 9090" jsonpath_is service web-0 '{.spec.ports[0].port}' 9090
  kubectl delete pod web-0 --grace-period=0 --force
  until_ok 60 "the Service deleted" gone service web-0
}

scenario_v2-hook() {
  until_ok 60 "two children keys" jsonpath_is configmapset settings '{.status.childKeys}' '["default/settings-backend","default/settings-frontend"]'
  kubectl patch configmapset settings --type merge -p '{"spec":{"configMaps":{"backend":null,"cache":{"size":"1Gi"}}}}'
  until_ok 60 "backend replaced by cache" jsonpath_is configmapset settings '{.status.childKeys}' '["default/settings-cache","default/settings-frontend"]'
  kubectl delete configmapset settings
  until_ok 60 "the ConfigMaps deleted" gone configmap settings-frontend
}

scenario_website() {
  until_ok 90 "2 ready replicas" jsonpath_is website my-site '{.status.readyReplicas}' 2
  kubectl patch website my-site --type merge -p '{"spec":{"replicas":3}}'
  until_ok 90 "3 ready replicas" jsonpath_is website my-site '{.status.readyReplicas}' 3
  kubectl delete website my-site
  until_ok 60 "the Deployment deleted" gone deployment my-site
}

scenario_blue-green() {
  until_ok 90 "blue active" jsonpath_is service web '{.spec.selector.example\.metactl\.io/color}' blue
  kubectl patch bluegreendeployment web --type json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"}]'
  until_ok 90 "green active" jsonpath_is service web '{.spec.selector.example\.metactl\.io/color}' green
  until_ok 90 "the blue Pods deleted" count_is 2 pods
  kubectl delete bluegreendeployment web
  until_ok 60 "the Pods deleted" count_is 0 pods
}

scenario_statefulset-like() {
  until_ok 90 "3 ready replicas" jsonpath_is catset nginx '{.status.readyReplicas}' 3
  kubectl patch catset nginx --type json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.28"}]'
  until_ok 120 "3 updated replicas" jsonpath_is catset nginx '{.status.updatedReplicas}' 3
  kubectl delete catset nginx
  until_ok 60 "the Pods deleted" count_is 0 pods
}

record() { # record LANG NAME
  local lang=$1 name=$2 dir=$work/$2
  mkdir -p "$dir"
  echo "== $lang/$name"
  "$metactl" dev --example "$name" --dir "$dir/dev" --record-dir "$dir/record" >"$dir/dev.log" 2>&1 &
  dev_pid=$!
  until_ok 180 "metactl dev to start" grep -q "metactl is running" "$dir/dev.log" || { cat "$dir/dev.log" >&2; return 1; }
  export KUBECONFIG=$dir/dev/kubeconfig
  if ! "scenario_$name"; then
    echo "record-examples: $name's scenario failed; metactl dev said:" >&2
    tail -40 "$dir/dev.log" >&2
    return 1
  fi
  stop_dev
  local sets=("$dir"/record/*/)
  if [ "${#sets[@]}" -ne 1 ] || [ ! -d "${sets[0]}" ]; then
    echo "record-examples: $name: want one controller's recorded set, got: ${sets[*]}" >&2
    return 1
  fi
  local out=examples/$lang/$name/recorded
  rm -rf "$out"
  mkdir -p "$out"
  # Calls without an answer (the hook failed, or was not up yet) cannot be
  # replayed; keep the others, numbered again from 1. The recorded
  # controller's webhook URLs name the port metactl dev chose for the hook
  # this time: written http://127.0.0.1/PATH (replay takes only the path),
  # so that recording again changes no file for that.
  python3 - "${sets[0]}" "$out" <<'PY'
import json, os, re, sys, urllib.parse
src, out = sys.argv[1:3]

def normalise(call):
    controller = (call.get("request") or {}).get("controller") or {}
    for hook in ((controller.get("spec") or {}).get("hooks") or {}).values():
        webhook = (hook or {}).get("webhook") or {}
        url = webhook.get("url")
        if url and urllib.parse.urlsplit(url).hostname in ("127.0.0.1", "localhost"):
            u = urllib.parse.urlsplit(url)
            webhook["url"] = urllib.parse.urlunsplit(("http", "127.0.0.1", u.path, u.query, u.fragment))

n = 0
for name in sorted(os.listdir(src), key=lambda f: int(f.split("-")[0])):
    if not re.fullmatch(r"[0-9]+-[a-z]+\.json", name):
        continue
    call = json.load(open(os.path.join(src, name)))
    if not call.get("response"):
        print(f"  dropped {name}: no answer ({call.get('error', '')})", file=sys.stderr)
        continue
    normalise(call)
    n += 1
    with open(os.path.join(out, "%04d-%s.json" % (n, call["hook"])), "w") as f:
        json.dump(call, f, indent=2)
        f.write("\n")
print(f"  {n} calls recorded into {out}", file=sys.stderr)
PY
  METACTL=$metactl hack/replay-examples.sh "$name"
}

status=0
for hook in examples/*/*/hook.*; do
  example=$(dirname "$hook")
  name=${example##*/}
  lang=${example#examples/}
  lang=${lang%%/*}
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
    continue
  fi
  record "$lang" "$name" || { stop_dev; status=1; }
done
exit "$status"
