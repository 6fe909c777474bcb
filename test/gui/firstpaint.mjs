// First paint of the GUI's pages with many services: starts a real
// `meshnames serve` (embedded store in a temporary directory), creates N
// MeshServices through the REST API (8 clients), waits until the last one
// has its VIP, then opens each page in chromium several times and prints
// the median time from navigation to the first contentful paint, and to
// the end of the response. Not part of run.sh: run it by hand,
//
//   (cd ../.. && go build -o test/gui/out/meshnames ./cmd/meshnames)
//   node firstpaint.mjs [N]          # N defaults to 100000
//
// and record the figures in docs/performance.md.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { freePort } from './ports.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const binary = process.env.MESHNAMES_BIN || path.join(here, 'out', 'meshnames');
const n = Number(process.argv[2] || 100000);
const runs = 5;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'meshnames-firstpaint-'));
const api = `http://127.0.0.1:${await freePort()}`;
const proc = spawn(binary, ['serve', '--api-addr', api.slice(7), '--dns-addr', `127.0.0.1:${await freePort()}`, '--xds-addr', '127.0.0.1:0', '--data-dir', path.join(dir, 'data')],
  { stdio: ['ignore', 'ignore', 'inherit'] });
const stop = () => { proc.kill('SIGTERM'); fs.rmSync(dir, { recursive: true, force: true }); };
process.on('exit', stop);

for (let i = 0; ; i++) {
  try { if ((await fetch(api + '/readyz')).ok) { break; } } catch { /* not yet */ }
  if (i > 300) { throw new Error('not ready'); }
  await new Promise((r) => setTimeout(r, 100));
}

let t0 = Date.now();
let next = 0;
async function client() {
  for (;;) {
    const i = next++;
    if (i >= n) { return; }
    const body = JSON.stringify({ type: 'MeshService', name: `svc-${i}`, mesh: 'default', labels: { team: `team-${i % 50}` },
      spec: { ports: [{ name: 'http', port: 80, targetPort: 8080, appProtocol: 'http' }] } });
    const res = await fetch(`${api}/meshes/default/meshservices/svc-${i}`, { method: 'PUT', body,
      headers: { 'Content-Type': 'application/json', Prefer: 'return=minimal' } });
    if (res.status !== 201) { throw new Error(`PUT svc-${i}: ${res.status} ${await res.text()}`); }
  }
}
await Promise.all(Array.from({ length: 8 }, client));
console.log(`created ${n} MeshServices in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
t0 = Date.now();
for (;;) {
  const o = await (await fetch(`${api}/meshes/default/meshservices/svc-${n - 1}`)).json();
  if ((o.status?.vips || []).length > 0) { break; }
  await new Promise((r) => setTimeout(r, 200));
}
console.log(`the last one had its VIP ${((Date.now() - t0) / 1000).toFixed(1)} s later`);
// Let the controllers finish their status writes and the cache settle.
await new Promise((r) => setTimeout(r, 5000));

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'meshnames-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, viewport: { width: 1280, height: 900 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = context.pages()[0] || await context.newPage();
const pages = [
  '/gui/', '/gui/services', '/gui/services?page=1000', `/gui/services?q=svc-${n - 1}`, '/gui/services?q=241.0.1.',
  '/gui/services?q=team%3Dteam-7+svc-9', `/gui/services/meshservices/default/svc-${n - 1}`, '/gui/generators',
  '/gui/search?q=241.0.0.1', `/gui/search?q=svc-${n - 1}.svc.mesh.local`, '/gui/dns', '/gui/dns?q=svc-99999',
];
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`| page | first contentful paint (median of ${runs}) | response end | server (fetch, median) | HTML bytes |`);
console.log('| --- | --- | --- | --- | --- |');
for (const p of pages) {
  const fcp = [];
  const resp = [];
  let bytes = 0;
  for (let i = 0; i < runs; i++) {
    await page.goto(api + p, { waitUntil: 'load', timeout: 120000 });
    const m = await page.evaluate(() => new Promise((resolve) => {
      const nav = performance.getEntriesByType('navigation')[0];
      new PerformanceObserver((list, obs) => {
        const paint = list.getEntriesByName('first-contentful-paint')[0];
        if (paint) {
          obs.disconnect();
          resolve({ fcp: paint.startTime, resp: nav.responseEnd, bytes: nav.transferSize });
        }
      }).observe({ type: 'paint', buffered: true });
    }));
    fcp.push(m.fcp);
    resp.push(m.resp);
    bytes = m.bytes;
  }
  const server = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await (await fetch(api + p)).text();
    server.push(performance.now() - t);
  }
  console.log(`| \`${p}\` | ${median(fcp).toFixed(0)} ms | ${median(resp).toFixed(0)} ms | ${median(server).toFixed(0)} ms | ${bytes} |`);
}
await context.close();
stop();
fs.rmSync(profile, { recursive: true, force: true });
process.exit(0);
