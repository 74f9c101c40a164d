#!/usr/bin/env node
// Sync hook of the blue-green CompositeController. Node's standard library
// only.
//
// A BlueGreenDeployment runs its Pods in one of two colors, blue and
// green, and owns a Service whose selector picks the active color. When
// spec.template changes, the inactive color gets spec.replicas Pods of the
// new template next to the active ones; once all of them exist and are
// Ready, the Service switches to that color and the old color's Pods are
// deleted. The state (which color is active, and each color's template)
// lives in the parent's status, so the hook itself is stateless.
//
// Usage: node hook.js [--port PORT]   (default 8080, or $PORT)
'use strict';

const http = require('node:http');
const crypto = require('node:crypto');

const APP_LABEL = 'example.metactl.io/bluegreen';
const COLOR_LABEL = 'example.metactl.io/color';
const REVISION_LABEL = 'example.metactl.io/revision';

function stable(value) {
  if (Array.isArray(value)) return '[' + value.map(stable).join(',') + ']';
  if (value && typeof value === 'object') {
    return '{' + Object.keys(value).sort().map((k) => JSON.stringify(k) + ':' + stable(value[k])).join(',') + '}';
  }
  return JSON.stringify(value);
}

function revisionOf(template) {
  return crypto.createHash('sha256').update(stable(template || {})).digest('hex').slice(0, 10);
}

function isReady(pod) {
  const conditions = (pod.status && pod.status.conditions) || [];
  return conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

const other = (color) => (color === 'blue' ? 'green' : 'blue');

function podsFor(bgd, color, state) {
  const pods = [];
  for (let i = 0; i < Number(bgd.spec.replicas || 0); i++) {
    const template = JSON.parse(JSON.stringify(state.template || {}));
    const meta = template.metadata || {};
    pods.push({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: `${bgd.metadata.name}-${color}-${i}`,
        labels: { ...(meta.labels || {}), [APP_LABEL]: bgd.metadata.name, [COLOR_LABEL]: color, [REVISION_LABEL]: state.revision },
        annotations: meta.annotations || {},
      },
      spec: template.spec || {},
    });
  }
  return pods;
}

function sync(request) {
  const bgd = request.parent;
  const replicas = Number(bgd.spec.replicas || 0);
  const port = Number(bgd.spec.port || 80);
  const template = bgd.spec.template || {};
  const revision = revisionOf(template);
  const status = bgd.status || {};
  const observed = Object.values(request.children['Pod.v1'] || {}).filter((p) => !p.metadata.deletionTimestamp);
  const podsOf = (color, rev) =>
    observed.filter((p) => (p.metadata.labels || {})[COLOR_LABEL] === color && (p.metadata.labels || {})[REVISION_LABEL] === rev);

  let active = status.active;
  let colors = JSON.parse(JSON.stringify(status.colors || {}));
  if (!colors[active]) {
    // First sync: blue, at once (there is nothing to switch from).
    active = 'blue';
    colors = { blue: { revision, template } };
  }
  if (colors[active].revision === revision) {
    // Nothing to roll out (or the change was undone): only the active color.
    colors = { [active]: colors[active] };
  } else {
    const next = other(active);
    if (!colors[next] || colors[next].revision !== revision) colors[next] = { revision, template };
    if (podsOf(next, revision).filter(isReady).length === replicas) {
      // Every Pod of the new color exists and is Ready: switch, and let the
      // old color's Pods go.
      active = next;
      colors = { [next]: colors[next] };
    }
  }

  const children = [];
  for (const [color, state] of Object.entries(colors)) children.push(...podsFor(bgd, color, state));
  children.push({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: bgd.metadata.name },
    spec: {
      selector: { [APP_LABEL]: bgd.metadata.name, [COLOR_LABEL]: active },
      ports: [{ port, targetPort: port, protocol: 'TCP' }],
    },
  });

  const report = {};
  for (const [color, state] of Object.entries(colors)) {
    const pods = podsOf(color, state.revision);
    report[color] = { revision: state.revision, template: state.template, pods: pods.length, ready: pods.filter(isReady).length };
  }
  return { status: { active, activeRevision: colors[active].revision, colors: report }, children };
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
  server.listen(port, '127.0.0.1', () => console.log(`blue-green hook listening on 127.0.0.1:${port}`));
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
