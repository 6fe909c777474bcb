// Browser tests of the meshnames web GUI: a real `meshnames serve` on free
// loopback ports with an embedded store in a temporary directory, driven
// through Debian's chromium by playwright-core. Resources are created
// through the REST API, then looked at in the GUI. Screenshots of every
// page go to out/ (not committed).
//
// Run with ./run.sh, which builds the binary and installs what is needed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { freePort } from './ports.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const out = path.join(here, 'out');
const binary = process.env.MESHNAMES_BIN || path.join(out, 'meshnames');
const grpcecho = process.env.GRPCECHO_BIN || path.join(out, 'grpcecho');
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';

let server; // the server most tests use: { proc, api, xds, log, dir }
const servers = [];
let context; // the browser context
let profile; // its profile directory
let page;
const consoleErrors = [];

async function waitFor(what, fn, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) { return v; }
    } catch (e) { last = e; }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what}: not within ${timeoutMs} ms${last ? ': ' + last.message : ''}\n--- server log:\n${server.log.join('')}`);
}

// startServer runs `meshnames serve` with args on free ports and waits
// until it is ready.
async function startServer(...args) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'meshnames-gui-'));
  const api = `127.0.0.1:${await freePort()}`;
  const dns = `127.0.0.1:${await freePort()}`;
  const xds = `127.0.0.1:${await freePort()}`;
  const log = [];
  const proc = spawn(binary, ['serve', '--api-addr', api, '--dns-addr', dns, '--xds-addr', xds, '--data-dir', path.join(dir, 'data'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout.on('data', (d) => log.push(d.toString()));
  proc.stderr.on('data', (d) => log.push(d.toString()));
  const srv = { proc, api: `http://${api}`, xds, log, dir };
  servers.push(srv);
  const deadline = Date.now() + 30000;
  for (;;) {
    try { if ((await fetch(srv.api + '/readyz')).ok) { return srv; } } catch { /* not yet */ }
    if (Date.now() > deadline) { throw new Error(`not ready within 30 s:\n${log.join('')}`); }
    await new Promise((r) => setTimeout(r, 50));
  }
}

// put writes a YAML document through the REST API.
async function put(apiPath, yaml) {
  const res = await fetch(server.api + apiPath, { method: 'PUT', headers: { 'Content-Type': 'application/yaml' }, body: yaml });
  assert.ok(res.status === 200 || res.status === 201, `PUT ${apiPath}: ${res.status} ${await res.text()}`);
}

async function apiGet(apiPath) {
  const res = await fetch(server.api + apiPath);
  assert.equal(res.status, 200, `GET ${apiPath}`);
  return res.json();
}

async function shot(name, p = page) {
  await p.screenshot({ path: path.join(out, `${name}.png`), fullPage: true });
}

before(async () => {
  fs.mkdirSync(out, { recursive: true });
  server = await startServer();
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'meshnames-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  page = context.pages()[0] || await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') { consoleErrors.push(`${m.text()} (${m.location().url})`); } });
  page.on('pageerror', (e) => consoleErrors.push(e.message));
  page.setDefaultTimeout(10000);

  // The README's walkthrough: two generators give a MeshService and an
  // external service the same name; the MeshService, older, wins.
  await put('/meshes/default/meshservices/redis', `type: MeshService
name: redis
mesh: default
labels:
  team: storage
spec:
  ports:
  - port: 6379
    targetPort: 6379
    appProtocol: tcp
`);
  await put('/meshes/default/meshexternalservices/httpbin', `type: MeshExternalService
name: httpbin
mesh: default
spec:
  match:
  - type: Domain
    value: httpbin.org
    port: 443
    protocol: tls
`);
  await put('/hostnamegenerators/by-team', `type: HostnameGenerator
name: by-team
spec:
  selector:
    meshService:
      matchLabels:
        team: storage
  template: "{{ .Name }}.storage.mesh.local"
`);
  await put('/meshes/default/meshexternalservices/redis-cloud', `type: MeshExternalService
name: redis-cloud
mesh: default
labels:
  team: storage
spec:
  match:
  - type: InternalVIP
    value: cloud.redis.ext
    port: 6379
    protocol: tcp
`);
  await put('/hostnamegenerators/external-by-team', `type: HostnameGenerator
name: external-by-team
spec:
  selector:
    meshExternalService:
      matchLabels:
        team: storage
  template: "redis.storage.mesh.local"
`);
  // Wait for the controllers: redis-cloud lost the name and has a VIP.
  await waitFor('redis-cloud named', async () => {
    const o = await apiGet('/meshes/default/meshexternalservices/redis-cloud');
    const a = (o.status?.addresses || []).find((x) => x.hostname === 'redis.storage.mesh.local');
    return a && a.status === 'NotAvailable' && (o.status?.vips || []).length > 0;
  });
});

after(async () => {
  if (context) { await context.close(); }
  for (const srv of servers) {
    if (srv.proc.exitCode !== null || srv.proc.signalCode !== null) { continue; } // stopped by its test
    srv.proc.kill('SIGTERM');
    await new Promise((r) => srv.proc.once('exit', r));
  }
  // The servers' data directories and the browser's profile.
  for (const dir of [...servers.map((srv) => srv.dir), profile]) {
    if (dir) { fs.rmSync(dir, { recursive: true, force: true }); }
  }
});

test('the root sends a browser to the GUI; the overview shows the counts and the names not available', async () => {
  await page.goto(server.api + '/');
  assert.equal(new URL(page.url()).pathname, '/gui/');
  assert.equal(await page.title(), 'Overview · meshnames');
  const counts = page.locator('table.numbers tbody tr', { hasText: 'default' });
  assert.deepEqual(await counts.locator('td').allTextContents(), ['1', '2', '0', '0']);
  const na = page.locator('section', { has: page.locator('#h-na') });
  await na.locator('td', { hasText: 'MeshExternalService default/redis-cloud' }).waitFor();
  assert.match(await na.textContent(), /held by|Held by/);
  assert.match(await page.locator('table.pools').textContent(), /241\.0\.0\.0\/8/);
  await shot('overview');
});

test('follow a collision from the loser to its winner', async () => {
  await page.goto(server.api + '/gui/services?kind=meshexternalservices');
  await page.getByRole('link', { name: 'redis-cloud', exact: true }).click();
  await page.waitForURL('**/gui/services/meshexternalservices/default/redis-cloud');
  const row = page.locator('#addresses tr', { hasText: 'redis.storage.mesh.local' });
  assert.match(await row.textContent(), /NotAvailable/);
  await shot('service-loser');
  await row.getByRole('link', { name: 'MeshService default/redis' }).click();
  await page.waitForURL('**/gui/services/meshservices/default/redis');
  assert.equal(await page.locator('h1').textContent(), 'MeshService default/redis');
  const won = page.locator('#addresses tr', { hasText: 'redis.storage.mesh.local' });
  assert.match(await won.textContent(), /Available/);
  assert.doesNotMatch(await won.textContent(), /NotAvailable/);
  // The inspection row of the winning generator, as the API reports it.
  const rep = await apiGet('/meshes/default/meshservices/redis/_hostnames');
  for (const it of rep.items) {
    const r = page.locator('#generators tbody tr', { has: page.getByRole('link', { name: it.generator, exact: true }) });
    assert.match(await r.textContent(), new RegExp(it.selects ? 'yes' : 'no'));
  }
  await shot('service-winner');
});

test('search an IP: from the services list, and "who is this?"', async () => {
  const redis = await apiGet('/meshes/default/meshservices/redis');
  const ip = redis.status.vips[0].ip;
  await page.goto(server.api + '/gui/services');
  await page.getByLabel('Search').fill(ip); // search as you type, no submit
  await page.locator('#count', { hasText: 'Services 1-1 of 1' }).waitFor();
  await page.waitForURL((u) => u.search.includes('q=' + ip));
  assert.deepEqual(await page.locator('table.services tbody th').allTextContents(), ['redis']);
  await shot('services-search-ip');

  await page.getByRole('link', { name: 'Who is this?' }).click();
  await page.getByLabel('IP or hostname').fill(ip);
  await page.getByLabel('IP or hostname').press('Enter');
  await page.locator('#holders', { hasText: 'MeshService default/redis' }).waitFor();
  assert.match(await page.locator('#vip-state').textContent(), /allocated/);
  await shot('who-is-ip');

  await page.getByLabel('IP or hostname').fill('redis.storage.mesh.local');
  await page.getByLabel('IP or hostname').press('Enter');
  const claims = page.locator('#claims tbody tr');
  await claims.first().waitFor();
  assert.match(await claims.nth(0).textContent(), /MeshService default\/redis.*Available/s);
  assert.match(await claims.nth(1).textContent(), /redis-cloud.*NotAvailable/s);
  await shot('who-is-hostname');
});

test('a page updates live, without a reload, when a service is created', async () => {
  await page.goto(server.api + '/gui/services');
  await page.evaluate(() => { window.__notReloaded = true; });
  await page.locator('#live-state', { hasText: 'updates live' }).waitFor();
  const start = Date.now();
  await put('/meshes/default/meshservices/live-one', `type: MeshService
name: live-one
mesh: default
spec:
  ports:
  - port: 80
    appProtocol: http
`);
  const put_ms = Date.now() - start;
  await page.getByRole('link', { name: 'live-one', exact: true }).waitFor({ timeout: 5000 });
  const seen_ms = Date.now() - start;
  // Then the controllers' status: the hostname and VIP appear too.
  const row = page.locator('table.services tbody tr', { hasText: 'live-one' });
  await row.locator('text=live-one.svc.mesh.local').waitFor({ timeout: 5000 });
  await row.locator('text=241.0.0.').waitFor({ timeout: 5000 });
  const named_ms = Date.now() - start;
  assert.equal(await page.evaluate(() => window.__notReloaded), true, 'the page was reloaded');
  console.log(`live update: PUT answered in ${put_ms} ms; row shown ${seen_ms} ms, named with its VIP ${named_ms} ms after the PUT started`);
  assert.ok(seen_ms < 1000, `the new service appeared after ${seen_ms} ms, want under 1 s`);
  await shot('services-live');
});

test('generators and DNS pages show the collision and the listing', async () => {
  await page.goto(server.api + '/gui/generators');
  const lost = page.locator('#gen-external-by-team');
  assert.match(await lost.textContent(), /redis\.storage\.mesh\.local/);
  assert.match(await lost.textContent(), /MeshService default\/redis/);
  await shot('generators');

  await page.goto(server.api + '/gui/dns');
  const listing = await apiGet('/meshes/default/_dns');
  const names = await page.locator('#dns-names tbody td:first-child').allTextContents();
  assert.deepEqual(names, listing.names.map((n) => n.name));
  await shot('dns');

  await page.goto(server.api + '/gui/zones');
  await shot('zones-standalone');
});

// runLines runs a command with env added to this process's, and collects
// its output (stdout and stderr) line by line.
function runLines(cmd, args, env = {}) {
  const lines = [];
  let rest = '';
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const take = (d) => {
    const parts = (rest + d.toString()).split('\n');
    rest = parts.pop();
    lines.push(...parts);
  };
  proc.stdout.on('data', take);
  proc.stderr.on('data', take);
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) { return; }
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  };
  return { proc, lines, stop };
}

test('a Dataplane page shows its proxy: a proxyless gRPC client connects, each type ACKed, then leaves', async () => {
  // A gRPC server registered as the inbound of Dataplane echo-1, the
  // MeshService echo that selects it, and Dataplane caller, whose proxy is
  // grpcecho's grpc-go xDS client.
  const echoPort = await freePort();
  const echo = runLines(grpcecho, ['serve', '--addr', `127.0.0.1:${echoPort}`, '--id', 'echo-1']);
  let caller;
  try {
    await waitFor('grpcecho serves', async () => echo.lines.some((l) => l.startsWith('serving ')));
    await put('/meshes/default/dataplanes/echo-1', `type: Dataplane
mesh: default
name: echo-1
networking:
  address: 127.0.0.1
  inbound:
  - port: ${echoPort}
    name: grpc
    tags:
      kuma.io/service: echo-backend
`);
    await put('/meshes/default/dataplanes/caller', 'type: Dataplane\nmesh: default\nname: caller\nnetworking:\n  address: 127.0.0.1\n');
    await put('/meshes/default/meshservices/echo', `type: MeshService
mesh: default
name: echo
spec:
  selector:
    dataplaneTags:
      kuma.io/service: echo-backend
  ports:
  - port: 8080
    targetPort: grpc
    appProtocol: grpc
`);
    await page.goto(server.api + '/gui/dataplanes');
    await page.getByRole('link', { name: 'caller', exact: true }).click();
    await page.waitForURL('**/gui/dataplanes/default/caller');
    await page.locator('#proxy-state', { hasText: 'not connected to this instance' }).waitFor();
    await page.evaluate(() => { window.__notReloaded = true; });

    // The client reads a bootstrap naming the server's ADS and the node
    // id <mesh>.<dataplane>; tokenless from loopback.
    const boot = path.join(server.dir, 'bootstrap.json');
    fs.writeFileSync(boot, JSON.stringify({
      xds_servers: [{ server_uri: server.xds, channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] }],
      node: { id: 'default.caller' },
    }));
    caller = runLines(grpcecho, ['call', '--count', '0', '--interval', '100ms', '--timeout', '2s', 'xds:///echo.svc.mesh.local:8080'], { GRPC_XDS_BOOTSTRAP: boot });
    await waitFor('a call answered by echo-1 through the xDS config', async () => caller.lines.includes('echo-1'));

    // The open page shows the stream without a reload: connected, and
    // each type the client subscribed to ACKed at the version the API
    // reports, nothing waiting.
    await page.locator('#proxy-state', { hasText: '● connected' }).waitFor({ timeout: 5000 });
    const types = await waitFor('the page shows what GET .../_xds reports', async () => {
      const xds = await apiGet('/meshes/default/dataplanes/caller/_xds');
      if (xds.streams.length !== 1) { return null; }
      const rows = [];
      for (const t of xds.streams[0].types) {
        if (t.pending || !t.ackedVersion) { return null; }
        const row = page.locator(`#stream-1-${t.type}`);
        if (await row.count() !== 1) { return null; }
        const acked = (await row.locator('.acked').textContent()).trim();
        const waiting = (await row.locator('.waiting').textContent()).trim();
        const nack = (await row.locator('.nack').textContent()).trim();
        if (acked !== t.ackedVersion || waiting !== 'no' || nack !== 'none') { return null; }
        rows.push(t.type);
      }
      const again = await apiGet('/meshes/default/dataplanes/caller/_xds');
      return JSON.stringify(again.streams) === JSON.stringify(xds.streams) ? rows.sort() : null;
    });
    assert.deepEqual(types, ['CDS', 'EDS', 'LDS']);
    assert.equal((await page.locator('#stream-1 .protocol').textContent()).trim(), 'state of the world (sotw)');
    assert.equal(await page.locator('.nack-message').count(), 0, 'a NACK is shown');
    assert.match(await page.locator('#stream-1-LDS .subscribed').textContent(), /echo\.svc\.mesh\.local:8080/);
    await shot('dataplane');

    // The client leaves: the page says so, still without a reload.
    await caller.stop();
    await page.locator('#proxy-state', { hasText: 'not connected to this instance' }).waitFor({ timeout: 5000 });
    assert.equal(await page.evaluate(() => window.__notReloaded), true, 'the page was reloaded');
    await shot('dataplane-disconnected');
  } finally {
    if (caller) { await caller.stop(); }
    await echo.stop();
  }
});

test('keyboard: a skip link first, "/" focuses the search box, links follow in order', async () => {
  await page.goto(server.api + '/gui/services');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Skip to the content');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'main');
  await page.keyboard.press('/');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'q');
  await page.keyboard.type('httpbin');
  await page.locator('#count', { hasText: 'Services 1-1 of 1' }).waitFor();
  // Tab from the box through the form to the first service link, and open it.
  for (let i = 0; i < 10; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(() => document.activeElement.textContent) === 'httpbin') { break; }
  }
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'httpbin');
  await page.keyboard.press('Enter');
  await page.waitForURL('**/gui/services/meshexternalservices/default/httpbin');
});

test('a 401 in the middle of a session asks for a token, which later requests carry', async () => {
  // On loopback without a token the API takes the request as admin's:
  // answer the next live poll with 401, as an expired token would get,
  // and see the prompt and the header. The token given is the admin
  // token the server wrote at its first start.
  const token = fs.readFileSync(path.join(server.dir, 'data', 'admin.token'), 'utf8').trim();
  await page.goto(server.api + '/gui/generators');
  let answered401 = false;
  const seen = [];
  await page.route('**/gui/_wait*', async (route) => {
    if (!answered401) {
      answered401 = true;
      await route.fulfill({ status: 401, contentType: 'application/json', body: '{"status":401,"title":"Unauthorized"}' });
      return;
    }
    seen.push(route.request().headers()['authorization']);
    await route.continue();
  });
  // Wake the poll in flight: a change makes it answer, the next one gets 401.
  await put('/meshes/default/meshservices/wake', 'type: MeshService\nname: wake\nmesh: default\nspec:\n  ports:\n  - port: 80\n');
  const dialog = page.getByRole('dialog', { name: 'Token required' });
  await dialog.waitFor();
  await shot('token-prompt');
  await page.getByLabel('Token', { exact: true }).fill(token);
  await page.getByRole('button', { name: 'Use token' }).click();
  await waitFor('a poll with the token', async () => seen.includes(`Bearer ${token}`));
  assert.equal(await page.evaluate(() => sessionStorage.getItem('meshnames-token')), token);
  const nav = page.waitForRequest((r) => r.url().endsWith('/gui/dns'));
  await page.getByRole('link', { name: 'DNS', exact: true }).click();
  assert.equal((await nav).headers()['authorization'], `Bearer ${token}`);
  // The page was fetched again with the token and is whole.
  await page.locator('h1', { hasText: 'DNS' }).waitFor();
  await page.unroute('**/gui/_wait*');
  await page.evaluate(() => sessionStorage.removeItem('meshnames-token'));
  // The one 401 answered above is the only console error it may cause.
  const i = consoleErrors.findIndex((m) => m.includes('status of 401'));
  assert.ok(i >= 0, 'the 401 was not seen');
  consoleErrors.splice(i, 1);
});

test('with tokens required: the GUI asks for one, a read-only token sees it, a token limited to meshes may not', async () => {
  const secured = await startServer('--api-loopback-admin=false');
  const admin = fs.readFileSync(path.join(secured.dir, 'data', 'admin.token'), 'utf8').trim();
  const issue = async (body) => {
    const res = await fetch(secured.api + '/tokens', { method: 'POST', body: JSON.stringify(body),
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${admin}` } });
    const text = await res.text();
    assert.equal(res.status, 201, `POST /tokens: ${text}`);
    return JSON.parse(text).token;
  };
  const readOnly = await issue({ name: 'viewer', role: 'read-only', validFor: '1h' });
  const limited = await issue({ name: 'owner', role: 'service-owner', meshes: ['default'], validFor: '1h' });
  const tab = await context.newPage();
  // The 401 and 403 answers are expected here; anything else is not.
  tab.on('console', (m) => { if (m.type() === 'error' && !/status of 40[13]|Status Error Code 40[13]/.test(m.text())) { consoleErrors.push(m.text()); } });
  try {
    // No token: the page asks for one; its script and style load.
    const res = await tab.goto(secured.api + '/gui/services');
    assert.equal(res.status(), 401);
    const dialog = tab.getByRole('dialog', { name: 'Token required' });
    await dialog.waitFor();
    assert.match(await dialog.textContent(), /token/i);
    await shot('token-required', tab);
    await tab.getByLabel('Token', { exact: true }).fill(readOnly);
    await tab.getByRole('button', { name: 'Use token' }).click();
    await tab.locator('h1', { hasText: 'Services' }).waitFor();
    await tab.locator('#count').waitFor();
    // Navigation keeps the token; so do the live updates.
    await tab.getByRole('link', { name: 'Generators' }).click();
    await tab.locator('#gen-local-universal-mesh-service').waitFor();
    await tab.locator('#live-state', { hasText: 'updates live' }).waitFor();
    // A token limited to meshes may not see every mesh: 403, and the
    // reason.
    await tab.evaluate(() => sessionStorage.clear());
    const denied = await tab.goto(secured.api + '/gui/');
    assert.equal(denied.status(), 401);
    await tab.getByLabel('Token', { exact: true }).fill(limited);
    const answer = tab.waitForResponse((r) => r.url().endsWith('/gui/'));
    await tab.getByRole('button', { name: 'Use token' }).click();
    assert.equal((await answer).status(), 403);
    await tab.getByRole('dialog', { name: 'Token required' }).waitFor();
    assert.match(await tab.locator('#token-reason').textContent(), /limited to meshes default/);
  } finally {
    await tab.close();
  }
});

test('zones: a global shows its zone as the API does, live; the zone shows its own stream', async () => {
  const syncAddr = `127.0.0.1:${await freePort()}`;
  const global = await startServer('--mode', 'global', '--sync-addr', syncAddr, '--sync-heartbeat', '300ms');
  const issued = await fetch(global.api + '/tokens/zone', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ zone: 'east', validFor: '1h' }) });
  const text = await issued.text();
  assert.equal(issued.status, 201, `POST /tokens/zone: ${text}`);
  const tokenFile = path.join(global.dir, 'east.token');
  fs.writeFileSync(tokenFile, JSON.parse(text).token, { mode: 0o600 });
  const zone = await startServer('--mode', 'zone', '--zone', 'east', '--global-address', `grpcs://${syncAddr}`,
    '--zone-token-file', tokenFile, '--sync-heartbeat', '300ms');
  const insight = async () => {
    const res = await fetch(global.api + '/zones/east/_insight');
    return res.ok ? res.json() : null;
  };
  const tab = await context.newPage();
  tab.on('console', (m) => { if (m.type() === 'error') { consoleErrors.push(`${m.text()} (${m.location().url})`); } });
  tab.on('pageerror', (e) => consoleErrors.push(e.message));
  try {
    // The global's zones page: east online, with the figures of its
    // insight once the stream is quiet (all it sent acknowledged).
    await tab.goto(global.api + '/gui/zones');
    await tab.locator('#zone-east .state', { hasText: 'online' }).waitFor();
    await waitFor('the zones page shows the insight the API serves', async () => {
      const before = await insight();
      const row = await tab.locator('#zone-east').evaluate((tr) => ({
        sent: tr.querySelector('.sent').textContent, received: tr.querySelector('.received').textContent,
        resources: tr.querySelector('.resources').textContent, refused: tr.querySelector('.refused').textContent,
      }));
      const after = await insight();
      return before && before.sent.revision === before.sent.acked && before.sent.acked === after.sent.acked &&
        before.received.revision === after.received.revision &&
        row.sent === `${after.sent.revision} / ${after.sent.acked}` && row.received === `${after.received.revision}` &&
        row.resources === `${after.sent.resources} / ${after.received.resources}` && row.refused === `${after.refused}`;
    });
    assert.match(await tab.locator('#zones-summary').textContent(), /1 zone: 1 online, 0 offline\./);
    await shot('zones', tab);
    await tab.goto(global.api + '/gui/');
    await tab.locator('#overview-zone-east .state', { hasText: 'online' }).waitFor();
    await shot('overview-global', tab);

    // The zone's own view of its stream.
    const zoneTab = await context.newPage();
    zoneTab.on('console', (m) => { if (m.type() === 'error') { consoleErrors.push(`${m.text()} (${m.location().url})`); } });
    await zoneTab.goto(zone.api + '/gui/zones');
    await zoneTab.locator('#link-state', { hasText: 'online' }).waitFor();
    const { instance } = await insight();
    assert.ok((await zoneTab.locator('#link').textContent()).includes(instance), 'the zone names the global instance the global reports');
    await shot('zones-zone', zoneTab);
    await zoneTab.close();

    // The zone stops: the open zones page of the global shows it offline
    // without a reload (no store revision changes: the page asks again
    // every 2 seconds).
    await tab.goto(global.api + '/gui/zones');
    await tab.evaluate(() => { window.__notReloaded = true; });
    zone.proc.kill('SIGTERM');
    await new Promise((r) => zone.proc.once('exit', r));
    const stopped = Date.now();
    await tab.locator('#zone-east .state', { hasText: 'offline' }).waitFor({ timeout: 5000 });
    console.log(`zones: east shown offline ${Date.now() - stopped} ms after the zone exited`);
    assert.equal(await tab.evaluate(() => window.__notReloaded), true, 'the page was reloaded');
    assert.equal((await insight()).online, false);
    await shot('zones-offline', tab);
  } finally {
    await tab.close();
  }
});

test('no script or style was refused and no script failed', () => {
  assert.deepEqual(consoleErrors, []);
});
