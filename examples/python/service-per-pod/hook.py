#!/usr/bin/env python3
"""Sync hook of the service-per-pod DecoratorController.

For each Pod labelled service-per-pod: "true" it asks for a Service of the
same name that selects only that Pod, and labels the Pod
service-per-pod/pod-name: <name> so that the selector has something to
match. The Service's port comes from the Pod's annotation
service-per-pod/port (default 80). Standard library only.

Usage: hook.py [--port PORT]   (default 8080, or $PORT)
"""
import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAME_LABEL = "service-per-pod/pod-name"
PORT_ANNOTATION = "service-per-pod/port"


def sync(request):
    pod = request["object"]
    name = pod["metadata"]["name"]
    try:
        port = int(pod["metadata"].get("annotations", {}).get(PORT_ANNOTATION, "80"))
    except ValueError:
        port = 80
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {NAME_LABEL: name}},
        "spec": {
            "selector": {NAME_LABEL: name},
            "ports": [{"port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }
    return {
        # Set on the Pod itself; labels not named here are left alone.
        "labels": {NAME_LABEL: name},
        # The attachment gets a controller ownerReference to the Pod.
        "attachments": [service],
        # null: a decorator leaves the Pod's status alone.
        "status": None,
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
    print(f"service-per-pod hook listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
