#!/usr/bin/env python3
"""A Job-running controller's hooks, for hook test's own tests.

sync asks for one Job per parent. finalize, while the parent is being
deleted, asks for no Job (so that metactl deletes it) and for an audit
ConfigMap, and answers finalized: true once the Job is gone and the audit
ConfigMap exists: a correct finalize hook that waits for its children.
With --bad-name, sync names its Job "Bad_Name!", which the API server
refuses. It listens on 127.0.0.1 at a free port and prints the port.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BAD_NAME = "--bad-name" in sys.argv


def job(parent):
    name = "Bad_Name!" if BAD_NAME else parent["metadata"]["name"] + "-run"
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "run", "image": "busybox", "command": ["true"]}]}}},
    }


def sync(request):
    jobs = request["children"].get("Job.batch/v1", {})
    return {"status": {"jobs": len(jobs)}, "children": [job(request["parent"])]}


def finalize(request):
    name = request["parent"]["metadata"]["name"]
    jobs = request["children"].get("Job.batch/v1", {})
    configmaps = request["children"].get("ConfigMap.v1", {})
    audit = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name + "-audit"},
             "data": {"deleted": name}}
    return {"children": [audit], "finalized": not jobs and (name + "-audit") in configmaps}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = finalize(request) if self.path == "/finalize" else sync(request)
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
