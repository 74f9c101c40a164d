#!/usr/bin/env python3
"""Sync hook of the namespace-defaults CompositeController.

Every Namespace labelled example.metactl.io/defaults=true gets three
defaults, kept in step with the namespace's annotations:

- NetworkPolicy default-deny-ingress: ingress only from Pods of the same
  namespace;
- ResourceQuota default-quota: pods from the annotation
  example.metactl.io/quota-pods (default 20);
- RoleBinding team-edit: ClusterRole edit for the group named by the
  annotation example.metactl.io/team (default <namespace>-team).

The parent is a built-in Namespace: metactl keeps this hook's status in
the namespace's metactl.io/status annotation and gives it back as
parent.status, which the hook reads to remember the teams that had the
namespace before (status.previousTeams). Standard library only.

Usage: hook.py [--port PORT]   (default 8080, or $PORT)
"""
import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEAM_ANNOTATION = "example.metactl.io/team"
QUOTA_ANNOTATION = "example.metactl.io/quota-pods"


def sync(request):
    parent = request["parent"]
    ns = parent["metadata"]["name"]
    annotations = parent["metadata"].get("annotations") or {}
    team = annotations.get(TEAM_ANNOTATION) or f"{ns}-team"
    pods = annotations.get(QUOTA_ANNOTATION) or "20"

    children = [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny-ingress", "namespace": ns},
            "spec": {
                "podSelector": {},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "default-quota", "namespace": ns},
            "spec": {"hard": {"pods": pods}},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "team-edit", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team}],
        },
    ]

    # The status this hook answered last time, given back by metactl.
    previous = parent.get("status") or {}
    previous_teams = list(previous.get("previousTeams") or [])
    old_team = previous.get("team")
    if old_team and old_team != team and old_team not in previous_teams:
        previous_teams.append(old_team)

    observed = request.get("children") or {}
    return {
        "status": {
            "team": team,
            "previousTeams": previous_teams,
            "quotaPods": pods,
            "defaults": sum(len(observed.get(k) or {}) for k in (
                "NetworkPolicy.networking.k8s.io/v1",
                "ResourceQuota.v1",
                "RoleBinding.rbac.authorization.k8s.io/v1",
            )),
        },
        "children": children,
    }


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/sync":
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length", 0))
        try:
            response = sync(json.loads(self.rfile.read(length)))
        except (ValueError, KeyError, TypeError) as err:
            self.send_error(400, str(err))
            return
        body = json.dumps(response).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"namespace-defaults hook listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
