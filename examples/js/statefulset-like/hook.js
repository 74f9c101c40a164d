#!/usr/bin/env node
// Sync hook of the catset CompositeController: a StatefulSet-like set of
// Pods with stable names (<set>-0 .. <set>-N-1) and a rolling update that
// metactl runs (RollingRecreate, see controller.yaml). Node's standard
// library only.
//
// Usage: node hook.js [--port PORT]   (default 8080, or $PORT)
'use strict';

const http = require('node:http');
const crypto = require('node:crypto');

const SET_LABEL = 'example.metactl.io/catset';
const ORDINAL_LABEL = 'example.metactl.io/ordinal';
const HASH_ANNOTATION = 'example.metactl.io/template-hash';

// stable renders JSON with sorted keys, so that equal templates hash alike.
function stable(value) {
  if (Array.isArray(value)) return '[' + value.map(stable).join(',') + ']';
  if (value && typeof value === 'object') {
    return '{' + Object.keys(value).sort().map((k) => JSON.stringify(k) + ':' + stable(value[k])).join(',') + '}';
  }
  return JSON.stringify(value);
}

function templateHash(template) {
  return crypto.createHash('sha256').update(stable(template || {})).digest('hex').slice(0, 10);
}

function isReady(pod) {
  const conditions = (pod.status && pod.status.conditions) || [];
  return conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

// podFor is the desired Pod with ordinal i. metactl calls the hook once per
// live revision of the parent, with the parent's spec of that revision, so
// the hook simply renders the spec it is given.
function podFor(set, i, hash) {
  const template = JSON.parse(JSON.stringify(set.spec.template || {}));
  const meta = template.metadata || {};
  const spec = template.spec || {};
  const name = `${set.metadata.name}-${i}`;
  spec.hostname = name;
  if (set.spec.serviceName) spec.subdomain = set.spec.serviceName;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      labels: { ...(meta.labels || {}), [SET_LABEL]: set.metadata.name, [ORDINAL_LABEL]: String(i) },
      annotations: { ...(meta.annotations || {}), [HASH_ANNOTATION]: hash },
    },
    spec,
  };
}

function sync(request) {
  const set = request.parent;
  const replicas = Number(set.spec.replicas || 0);
  const hash = templateHash(set.spec.template);
  const pods = Object.values(request.children['Pod.v1'] || {}).filter((p) => !p.metadata.deletionTimestamp);
  const children = [];
  for (let i = 0; i < replicas; i++) children.push(podFor(set, i, hash));
  return {
    // metactl adds status.observedGeneration and, during a rolling
    // update, the condition of type Updated.
    status: {
      replicas: pods.length,
      readyReplicas: pods.filter(isReady).length,
      updatedReplicas: pods.filter((p) => (p.metadata.annotations || {})[HASH_ANNOTATION] === hash).length,
      templateHash: hash,
    },
    children,
  };
}

function serve(port) {
  const server = http.createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/sync') {
      res.writeHead(404).end();
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body;
      try {
        body = JSON.stringify(sync(JSON.parse(Buffer.concat(chunks).toString())));
      } catch (err) {
        res.writeHead(400, { 'Content-Type': 'text/plain' }).end(String(err));
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }).end(body);
    });
  });
  server.listen(port, '127.0.0.1', () => console.log(`catset hook listening on 127.0.0.1:${port}`));
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(0));
}

function parsePort(argv) {
  const i = argv.indexOf('--port');
  if (i >= 0 && argv[i + 1]) return Number(argv[i + 1]);
  const eq = argv.find((a) => a.startsWith('--port='));
  if (eq) return Number(eq.slice('--port='.length));
  return Number(process.env.PORT || 8080);
}

serve(parsePort(process.argv.slice(2)));
