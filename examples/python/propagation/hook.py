#!/usr/bin/env python3
"""Customize and sync hooks of the configmap-propagation CompositeController.

A ConfigMapPropagation (cluster-scoped) copies the ConfigMap
spec.sourceNamespace/spec.sourceName into every namespace whose labels
match spec.targetNamespaceSelector. The customize hook declares the source
and the namespaces as related objects; the sync hook finds them in the
request's "related" map and asks for one copy per namespace. Standard
library only.

Usage: hook.py [--port PORT]   (default 8080, or $PORT)
"""
import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SOURCE_ANNOTATION = "example.metactl.io/propagated-from"


def customize(request):
    spec = request["parent"].get("spec", {})
    return {
        "relatedResources": [
            {
                "apiVersion": "v1",
                "resource": "configmaps",
                "namespace": spec["sourceNamespace"],
                "names": [spec["sourceName"]],
            },
            {
                "apiVersion": "v1",
                "resource": "namespaces",
                "labelSelector": spec.get("targetNamespaceSelector") or {},
            },
        ]
    }


def sync(request):
    parent = request["parent"]
    spec = parent.get("spec", {})
    source_ns, source_name = spec["sourceNamespace"], spec["sourceName"]
    source_key = f"{source_ns}/{source_name}"
    related = request.get("related") or {}
    # The parent is cluster-scoped, so namespaced objects are keyed
    # "namespace/name" and namespaces by their name.
    source = related.get("ConfigMap.v1", {}).get(source_key)
    namespaces = sorted(
        name
        for name, ns in related.get("Namespace.v1", {}).items()
        if name != source_ns and not ns["metadata"].get("deletionTimestamp")
    )

    children = []
    if source is not None:
        for ns in namespaces:
            copy = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": source_name,
                    "namespace": ns,
                    "annotations": {SOURCE_ANNOTATION: source_key},
                },
                "data": source.get("data", {}),
            }
            if source.get("binaryData"):
                copy["binaryData"] = source["binaryData"]
            children.append(copy)
    copies = sorted(request["children"].get("ConfigMap.v1", {}))
    return {
        "status": {
            "source": source_key,
            "sourceFound": source is not None,
            "targetNamespaces": namespaces if source is not None else [],
            "copies": len(copies),
        },
        "children": children,
    }


HOOKS = {"/customize": customize, "/sync": sync}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        hook = HOOKS.get(self.path)
        if hook is None:
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length", 0))
        try:
            response = hook(json.loads(self.rfile.read(length)))
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
    print(f"configmap-propagation hooks listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
