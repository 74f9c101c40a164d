#!/usr/bin/env python3
"""Sync hook of the indexed-job CompositeController.

An IndexedJob asks for spec.completions Pods, one per index 0..N-1, named
<job>-<index>, each made from spec.template with its index in a label, an
annotation and the JOB_COMPLETION_INDEX environment variable. The status
counts the Pods by phase. Standard library only.

Usage: hook.py [--port PORT]   (default 8080, or $PORT)
"""
import argparse
import copy
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

JOB_LABEL = "example.metactl.io/indexed-job"
INDEX_KEY = "example.metactl.io/job-index"


def pod_for(job, index):
    """The desired Pod for one index, from the job's Pod template."""
    template = copy.deepcopy(job["spec"].get("template", {}))
    meta = template.get("metadata", {})
    spec = template.get("spec", {})
    labels = dict(meta.get("labels", {}))
    labels[JOB_LABEL] = job["metadata"]["name"]
    labels[INDEX_KEY] = str(index)
    annotations = dict(meta.get("annotations", {}))
    annotations[INDEX_KEY] = str(index)
    spec.setdefault("restartPolicy", "Never")
    for container in spec.get("initContainers", []) + spec.get("containers", []):
        env = [e for e in container.get("env", []) if e.get("name") != "JOB_COMPLETION_INDEX"]
        env.append({"name": "JOB_COMPLETION_INDEX", "value": str(index)})
        container["env"] = env
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job['metadata']['name']}-{index}",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }


def sync(request):
    job = request["parent"]
    completions = int(job.get("spec", {}).get("completions", 0))
    pods = request["children"].get("Pod.v1", {}).values()

    phases = {"active": 0, "succeeded": 0, "failed": 0}
    succeeded = set()
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        phase = pod.get("status", {}).get("phase", "Pending")
        if phase == "Succeeded":
            phases["succeeded"] += 1
            succeeded.add(pod["metadata"].get("annotations", {}).get(INDEX_KEY))
        elif phase == "Failed":
            phases["failed"] += 1
        else:
            phases["active"] += 1

    status = dict(phases)
    status["completions"] = completions
    status["complete"] = all(str(i) in succeeded for i in range(completions))
    return {
        "status": status,
        # Indexes >= completions are not asked for, so scaling down deletes
        # their Pods; Pods that exist are kept as they are (OnDelete).
        "children": [pod_for(job, i) for i in range(completions)],
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
    print(f"indexed-job hook listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
