#!/usr/bin/env python3
"""Sync hook of the hello-world CompositeController.

For each HelloWorld parent it asks for one ConfigMap holding a greeting
for spec.who, and reports the greeting in the parent's status, with a
Ready condition (True once the ConfigMap exists) and an Event when the
greeting changes. Standard library only.

The condition has no lastTransitionTime: metactl keeps the time the
condition's status last changed, and sets its observedGeneration. The
Event ("events", a metactl addition to the protocol) is asked for only
when the greeting differs from the one in the status the hook is given,
so that it is recorded once per change, not at every sync.

Each request from metactl carries a W3C traceparent header: the hook logs
the trace id it names, one line per call, so that the call can be found
in the trace metactl exports (docs/tracing.md). A hook that traces itself
passes the header to its OpenTelemetry SDK's propagator instead.

Usage: hook.py [--port PORT]   (default 8080, or $PORT)
"""
import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sync(request):
    parent = request["parent"]
    who = parent.get("spec", {}).get("who", "World")
    greeting = f"Hello, {who}!"
    children = request["children"].get("ConfigMap.v1", {})
    ready = {"type": "Ready", "status": "True", "reason": "ConfigMapCreated",
             "message": "the greeting is in its ConfigMap"}
    if not children:
        ready.update(status="False", reason="ConfigMapPending", message="the ConfigMap is being created")
    events = []
    if parent.get("status", {}).get("greeting") != greeting:
        events.append({"type": "Normal", "reason": "GreetingChanged", "message": greeting})
    return {
        "status": {"greeting": greeting, "configMaps": len(children), "conditions": [ready]},
        "events": events,
        "children": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": parent["metadata"]["name"] + "-greeting"},
                "data": {"greeting": greeting},
            }
        ],
    }


def trace_id(traceparent):
    """The trace id of a W3C traceparent header, None when invalid."""
    parts = (traceparent or "").strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    try:
        int(parts[1], 16)
    except ValueError:
        return None
    return parts[1]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/sync":
            self.send_error(404)
            return
        trace = trace_id(self.headers.get("traceparent"))
        if trace:
            print(f"sync call in trace {trace}", flush=True)
        length = int(self.headers.get("Content-Length", 0))
        try:
            response = sync(json.loads(self.rfile.read(length)))
        except (ValueError, KeyError) as err:
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
    print(f"hello-world hook listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
