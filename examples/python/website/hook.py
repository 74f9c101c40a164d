#!/usr/bin/env python3
"""Sync hook of the website CompositeController.

A Website asks for a web server: a Deployment running spec.image with
spec.replicas Pods, and a Service in front of them on spec.port. The
status reports how many of those Pods are ready, read from the observed
Deployment, and the Service's address. Standard library only.

Usage: hook.py [--port PORT]   (default 8080, or $PORT)
"""
import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The label that ties the Pods to their Website: the Deployment selects
# its Pods with it, and the Service sends traffic to them.
SITE_LABEL = "example.metactl.io/website"


def sync(request):
    site = request["parent"]
    name = site["metadata"]["name"]
    spec = site.get("spec", {})
    image = spec["image"]
    replicas = int(spec.get("replicas", 1))
    port = int(spec.get("port", 80))
    pod_labels = {SITE_LABEL: name}

    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": pod_labels},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": image,
                            "ports": [{"containerPort": port}],
                        }
                    ]
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "selector": pod_labels,
            "ports": [{"name": "http", "port": port, "targetPort": port}],
        },
    }

    # The children metactl observed, keyed by kind and then by name. On the
    # first call there are none yet: the Deployment is about to be created.
    observed = request["children"]["Deployment.apps/v1"].get(name, {})
    ready = observed.get("status", {}).get("readyReplicas", 0)
    namespace = site["metadata"].get("namespace", "default")
    return {
        "status": {
            "replicas": replicas,
            "readyReplicas": ready,
            "url": f"http://{name}.{namespace}.svc:{port}",
        },
        "children": [deployment, service],
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
            # Any answer but 200 is a failed sync: metactl changes nothing
            # and shows the start of this body in a SyncError Event on the
            # Website, so keep it short and plain.
            self.reply(500, "text/plain", f"{type(err).__name__}: {err}\n".encode())
            return
        self.reply(200, "application/json", json.dumps(response).encode())

    def reply(self, code, content_type, body):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
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
    print(f"website hook listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
