#!/usr/bin/env python3
"""Sync hook (protocol v2) of the configmap-set CompositeController.

A ConfigMapSet asks for one ConfigMap <set>-<key> per entry of
spec.configMaps. The hook declares `version: v2`, so the children it is
sent are keyed "namespace/name"; it reads the keys as such and reports
them in status.childKeys. Standard library only.

Usage: hook.py [--port PORT]   (default 8080, or $PORT)
"""
import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sync(request):
    parent = request["parent"]
    name = parent["metadata"]["name"]
    namespace = parent["metadata"]["namespace"]
    entries = parent.get("spec", {}).get("configMaps") or {}

    # v2 keys: "namespace/name" for every namespaced object.
    observed = request["children"].get("ConfigMap.v1", {})
    keys = sorted(observed)
    stale = []
    for key in keys:
        child_ns, _, child_name = key.rpartition("/")
        if child_ns != namespace:
            raise ValueError(f"child key {key!r} is not namespace/name in {namespace}")
        if child_name[len(name) + 1:] not in entries:
            stale.append(key)

    children = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-{key}", "namespace": namespace},
            "data": data or {},
        }
        for key, data in sorted(entries.items())
    ]
    # v2 reads the response strictly: only fields of the protocol.
    return {
        "status": {
            "configMaps": len(observed),
            "childKeys": keys,
            "stale": stale,
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
    print(f"configmap-set (v2) hook listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
