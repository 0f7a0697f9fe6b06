// node --test extension/lib/page-fetch.test.js
//
// Every rule of lib/page-fetch.js against a REAL local HTTP server (node's fetch): what the server
// received (each request logged with its host name and cookies) is the proof. The server is on
// 127.0.0.1; `browser()` below plays the few parts of a browser node's fetch lacks, as Chromium does
// them (measured: docs/platform.md §14): names mapped to the server like --host-resolver-rules, a
// cookie jar used only with `credentials: 'include'`, `redirect: 'manual'` answering an opaque
// redirect (no Location), and a request watch reporting each request's target and server address
// like chrome.webRequest. The real browser: tests/e2e/page-fetch.e2e.mjs.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import {
  FETCH_LIMITS,
  MAX_REDIRECTS,
  PageFetchError,
  checkTarget,
  createRequestWatch,
  credentialsFor,
  isPrivateHost,
  isPrivateIp,
  pageFetch,
  pageFetchMessage,
  sameOrigin,
} from './page-fetch.js';

const MiB = 1024 * 1024;
const PDF = Buffer.from('%PDF-1.4 a small private paper');

// ---- the server: routes by the name the request was made for ------------------------------------

const requests = []; // {host, scheme, path, cookie}
const streamed = new Map(); // path → bytes written before the client stopped
const closed = new Set(); // paths whose endless body the client stopped
const routes = {
  'evil.example /article.png': (q, s) => s.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from([137, 80, 78, 71])),
  'evil.example /page.html': (q, s) => s.writeHead(200, { 'content-type': 'text/html' }).end('<p>an HTML page</p>'),
  'evil.example /a.pdf': (q, s) => s.writeHead(302, { location: '/files/a.pdf' }).end(),
  'evil.example /files/a.pdf': (q, s) => s.writeHead(200, { 'content-type': 'application/pdf' }).end(PDF),
  'evil.example /cross.pdf': (q, s) => s.writeHead(302, { location: 'http://intranet.example/private.pdf' }).end(),
  'evil.example /to-camera.png': (q, s) => s.writeHead(302, { location: 'http://camera.lan/snapshot.png' }).end(),
  'evil.example /loop': (q, s) => s.writeHead(302, { location: '/loop' }).end(),
  'evil.example /up.pdf': (q, s) => (q.headers['x-test-scheme'] === 'https' ? s.writeHead(200, { 'content-type': 'application/pdf' }).end(PDF) : s.writeHead(301, { location: 'https://evil.example/up.pdf' }).end()),
  'evil.example /missing.png': (q, s) => s.writeHead(404).end(),
  'evil.example /declared.png': (q, s) => {
    s.writeHead(200, { 'content-type': 'image/png', 'content-length': String(100 * MiB) });
    s.write(Buffer.alloc(64 * 1024));
  },
  'evil.example /endless.png': (q, s) => endless(q, s, 'image/png'),
  'evil.example /endless.vtt': (q, s) => endless(q, s, 'text/vtt', 'WEBVTT\n\n'),
  'evil.example /slow.png': (q, s) => {
    s.writeHead(200, { 'content-type': 'image/png' });
    const t = setInterval(() => s.write('x'), 50);
    s.on('close', () => clearInterval(t));
  },
  'intranet.example /login': (q, s) => s.writeHead(200, { 'set-cookie': 'sid=SECRET; HttpOnly; SameSite=Strict; Path=/', 'content-type': 'text/html' }).end('ok'),
  'intranet.example /private.pdf': (q, s) => s.writeHead(200, { 'content-type': 'application/pdf' }).end(PDF),
  'camera.lan /snapshot.png': (q, s) => s.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from([1, 2, 3])),
  'cdn.example /tide.png': (q, s) => s.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from([4, 5, 6])),
};

/** A body with no Content-Length that goes on until the client stops reading (at most 256 MiB). */
function endless(q, s, type, head = '') {
  s.writeHead(200, { 'content-type': type });
  const chunk = Buffer.alloc(64 * 1024, 'a');
  let sent = 0;
  const path = q.url;
  const pump = () => {
    while (sent < 256 * MiB) {
      sent += chunk.length;
      streamed.set(path, sent);
      if (!s.write(sent === chunk.length && head ? Buffer.concat([Buffer.from(head), chunk]) : chunk)) return void s.once('drain', pump);
    }
    s.end();
  };
  s.on('close', () => closed.add(path));
  pump();
}

const server = http.createServer((q, s) => {
  const host = String(q.headers['x-test-host'] ?? q.headers.host).split(':')[0];
  requests.push({ host, scheme: q.headers['x-test-scheme'] ?? 'http', path: q.url, cookie: q.headers.cookie ?? '' });
  const route = routes[`${host} ${q.url.split('?')[0]}`];
  if (route) route(q, s);
  else s.writeHead(404).end();
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const PORT = server.address().port;
after(() => {
  server.closeAllConnections();
  server.close();
});
/** The tab's page (on a public-looking name the test maps to the server). */
const TAB = 'https://evil.example/article.html';

/**
 * What a browser adds to node's fetch, as Chromium does it: every name to this server, the jar's
 * cookies with `credentials: 'include'` only, an opaque answer to a redirect in `manual` mode (and
 * the browser's own following in `follow` mode), and `watch`, which reports each request's redirect
 * target and server address like chrome.webRequest. `ips` says which address a name "resolved" to
 * (the socket is always 127.0.0.1).
 */
function browser({ ips = {}, opaque = true } = {}) {
  const jar = new Map([['intranet.example', 'sid=SECRET']]);
  const seen = [];
  const one = async (u, o) => {
    const headers = { 'x-test-host': u.hostname, 'x-test-scheme': u.protocol.slice(0, -1) };
    if (o.credentials === 'include' && jar.has(u.hostname)) headers.cookie = jar.get(u.hostname);
    const at = Date.now();
    const res = await fetch(`http://127.0.0.1:${PORT}${u.pathname}${u.search}`, { redirect: 'manual', headers, signal: o.signal });
    const loc = res.headers.get('location');
    seen.push({ url: u.href, at, ip: ips[u.hostname] ?? '127.0.0.1', status: res.status, ...(loc ? { redirectUrl: new URL(loc, u).href } : {}) });
    return { res, loc };
  };
  async function fetchImpl(url, o = {}) {
    let u = new URL(url);
    for (let n = 0; n < 20; n++) {
      const { res, loc } = await one(u, o);
      if (res.status >= 300 && res.status < 400 && loc) {
        if (o.redirect === 'manual') {
          if (!opaque) return named(res, u.href);
          await res.body?.cancel();
          return { type: 'opaqueredirect', status: 0, ok: false, url: u.href, headers: new Headers(), body: null };
        }
        await res.body?.cancel();
        u = new URL(loc, u);
        continue;
      }
      return named(res, u.href);
    }
    throw new TypeError('too many redirects');
  }
  const watch = {
    holds: 0,
    hold() {
      watch.holds++;
      return () => watch.holds--;
    },
    async outcome(url, { since }) {
      const r = seen.filter((x) => x.url === url && x.at >= since - 50).pop();
      return r ? { ip: r.ip, status: r.status, redirectUrl: r.redirectUrl ?? null } : null;
    },
  };
  return { fetchImpl, watch, seen };
}

/** A response that says it came from `url` (node's would name 127.0.0.1). */
const named = (res, url) => new Proxy(res, { get: (t, k) => (k === 'url' ? url : Reflect.get(t, k)) });

/** The requests the server received during `fn`. */
async function received(fn) {
  const from = requests.length;
  let result;
  let error;
  try {
    result = await fn();
  } catch (e) {
    error = e;
  }
  return { result, error, got: requests.slice(from) };
}

const refusal = (reason) => (e) => e instanceof PageFetchError && e.reason === reason;

// ---- the rules ---------------------------------------------------------------------------------

test('addresses on the reader\'s own network or computer: IP literals (v4, v6, mapped forms), localhost, single labels, special-use names', () => {
  for (const h of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '[::1]', '[::]', '[fe80::1]', '[fd12:3456::1]', '[::ffff:7f00:1]', '[::ffff:a00:1]', '[64:ff9b::a00:1]', '[2002:c0a8:101::1]', 'localhost', 'app.localhost', 'intranet', 'camera.lan', 'printer.local', 'db.internal', 'nas.home.arpa', 'router.home', 'x.corp', 'camera.lan.']) {
    assert.equal(isPrivateHost(h), true, h);
  }
  for (const h of ['evil.example', 'www.youtube.com', '8.8.8.8', '172.32.0.1', '[2606:4700::1111]', '[::ffff:808:808]', 'lan.example.com']) assert.equal(isPrivateHost(h), false, h);
  for (const ip of ['10.0.0.5', '127.0.0.1', '::1', '::ffff:127.0.0.1', 'fe80::1%eth0', 'fc00::1']) assert.equal(isPrivateIp(ip), true, ip);
  for (const ip of ['93.184.216.34', '2606:4700::1111', 'not an ip', '']) assert.equal(isPrivateIp(ip), false, ip);
  // the URL parser's other spellings of 127.0.0.1 come out as it
  for (const u of ['http://0x7f.1/', 'http://2130706433/', 'http://127.1/', 'http://[::ffff:127.0.0.1]/']) assert.throws(() => checkTarget(u, TAB), refusal('private_address'), u);
});

test('same origin, and where cookies go: the tab\'s origin only (http → https of the same host counts)', () => {
  assert.equal(sameOrigin('http://a.example/x', 'https://a.example/y'), true);
  assert.equal(sameOrigin('https://a.example/x', 'http://a.example/y'), false, 'never down to http');
  assert.equal(sameOrigin('http://a.example:8080/x', 'https://a.example/y'), false);
  assert.equal(sameOrigin('https://a.example/x', 'https://b.a.example/y'), false);
  assert.equal(credentialsFor('https://evil.example/p.pdf', TAB), 'include');
  assert.equal(credentialsFor('http://intranet.example/p.pdf', TAB), 'omit');
  assert.equal(credentialsFor('https://evil.example/p.pdf', ''), 'omit', 'no tab: no cookies');
});

test('only http and https; nothing is requested for another scheme', async () => {
  for (const u of ['ftp://evil.example/a.png', 'file:///etc/passwd', 'data:image/png;base64,AAAA', 'javascript:alert(1)', 'not a url']) {
    const { error, got } = await received(() => pageFetch(u, { kind: 'figure', tabUrl: TAB, fetchImpl: browser().fetchImpl }));
    assert.ok(refusal('scheme')(error), u);
    assert.deepEqual(got, []);
  }
});

test('a private target is refused before anything is sent, unless the tab is on the reader\'s network', async () => {
  const b = browser();
  for (const u of ['http://camera.lan/snapshot.png', `http://127.0.0.1:${PORT}/article.png`, 'http://[::1]/x.png', 'http://intranet/x.png']) {
    const { error, got } = await received(() => pageFetch(u, { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
    assert.ok(refusal('private_address')(error), `${u}: ${error}`);
    assert.equal(error.code, 'fetch_refused');
    assert.deepEqual(got, [], `${u}: no request`);
  }
  // a tab on the reader's network: its pictures there are fetched
  const { result, got } = await received(() => pageFetch('http://camera.lan/snapshot.png', { kind: 'figure', tabUrl: 'http://192.168.1.20/wiki', fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.deepEqual([...result.bytes], [1, 2, 3]);
  assert.deepEqual(got.map((r) => r.host), ['camera.lan']);
});

test("cookies go only to the tab's own origin", async () => {
  const b = browser();
  // the intranet's page is the tab: its cookie goes with its own PDF
  let r = await received(() => pageFetch('http://intranet.example/private.pdf', { kind: 'pdf', tabUrl: 'http://intranet.example/docs', fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.equal(r.got[0].cookie, 'sid=SECRET');
  // a page elsewhere naming the intranet's file: fetched without it (and then refused: a private address, below)
  r = await received(() => pageFetch('http://intranet.example/private.pdf', { kind: 'pdf', tabUrl: TAB, fetchImpl: b.fetchImpl }));
  assert.equal(r.got[0].cookie, '');
  assert.deepEqual([...r.result.bytes], [...PDF], 'without a watch nothing says the server is private');
});

test('a redirect to the same origin is followed (cookies kept to the tab\'s origin), and the result names the last hop', async () => {
  for (const opaque of [true, false]) {
    const b = browser({ opaque });
    const { result, got } = await received(() => pageFetch('https://evil.example/a.pdf', { kind: 'pdf', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
    assert.equal(result.url, 'https://evil.example/files/a.pdf');
    assert.deepEqual([...result.bytes], [...PDF]);
    assert.deepEqual(got.map((r) => r.path), ['/a.pdf', '/files/a.pdf'], `opaque ${opaque}`);
    assert.equal(b.watch.holds, 0, 'the watch is released');
  }
  // http → https of the same host
  const b = browser();
  const { result, got } = await received(() => pageFetch('http://evil.example/up.pdf', { kind: 'pdf', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.equal(result.url, 'https://evil.example/up.pdf');
  assert.deepEqual(got.map((r) => `${r.scheme} ${r.path}`), ['http /up.pdf', 'https /up.pdf']);
});

test('a redirect to another origin is refused: the other site receives nothing (the watch shows the target)', async () => {
  for (const [url, to] of [
    ['https://evil.example/cross.pdf', 'http://intranet.example/private.pdf'],
    ['https://evil.example/to-camera.png', 'http://camera.lan/snapshot.png'],
  ]) {
    for (const opaque of [true, false]) {
      const b = browser({ opaque });
      const { error, got } = await received(() => pageFetch(url, { kind: 'pdf', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
      assert.ok(refusal('redirect_other_origin')(error), String(error));
      assert.deepEqual(error.values, [url, to]);
      assert.deepEqual(got.map((r) => r.host), ['evil.example'], `${url} (opaque ${opaque}): nothing reached ${to}`);
    }
  }
});

test('without a watch an opaque redirect is followed once without cookies and its final address re-checked', async () => {
  const b = browser();
  // to the same origin: accepted
  let r = await received(() => pageFetch('https://evil.example/a.pdf', { kind: 'pdf', tabUrl: TAB, fetchImpl: b.fetchImpl }));
  assert.equal(r.result.url, 'https://evil.example/files/a.pdf');
  assert.deepEqual(r.got.map((x) => x.path), ['/a.pdf', '/a.pdf', '/files/a.pdf']);
  // to the intranet: its cookie never sent, the body refused
  r = await received(() => pageFetch('https://evil.example/cross.pdf', { kind: 'pdf', tabUrl: TAB, fetchImpl: b.fetchImpl }));
  assert.ok(refusal('redirect_other_origin')(r.error), String(r.error));
  assert.deepEqual(r.got.filter((x) => x.host === 'intranet.example').map((x) => x.cookie), [''], 'reached without its cookie');
});

test(`a redirect loop stops after ${MAX_REDIRECTS} redirects`, async () => {
  const b = browser();
  const { error, got } = await received(() => pageFetch('https://evil.example/loop', { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.ok(refusal('too_many_redirects')(error));
  assert.equal(got.length, MAX_REDIRECTS + 1);
});

test("a body from a private address (a public-looking name) is refused unless the tab is on one or it is the tab's own host", async () => {
  const b = browser({ ips: { 'intranet.example': '10.0.0.5', 'evil.example': '10.0.0.7', 'cdn.example': '93.184.216.34' } });
  let r = await received(() => pageFetch('http://intranet.example/private.pdf', { kind: 'pdf', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.ok(refusal('private_ip')(r.error), String(r.error));
  assert.deepEqual(r.error.values, ['http://intranet.example/private.pdf', '10.0.0.5']);
  assert.equal(r.got[0].cookie, '', 'and its cookie was not sent');
  // the tab's own host: what the page itself is served from
  r = await received(() => pageFetch('https://evil.example/article.png', { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.equal(r.error, undefined);
  // a public address: fine
  r = await received(() => pageFetch('https://cdn.example/tide.png', { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.deepEqual([...r.result.bytes], [4, 5, 6]);
  // a tab on the reader's network
  r = await received(() => pageFetch('http://intranet.example/private.pdf', { kind: 'pdf', tabUrl: 'http://10.0.0.9/', fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.equal(r.error, undefined);
});

test('bodies are read as a stream and cancelled the moment the cap is passed; a declared size over it is refused unread', async (t) => {
  const b = browser();
  const t0 = process.memoryUsage().rss;
  let r = await received(() => pageFetch('https://evil.example/endless.png', { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.ok(r.error instanceof PageFetchError && r.error.reason === 'too_large' && r.error.code === 'fetch_too_large', String(r.error));
  assert.deepEqual(r.error.values, [8]);
  await waitFor(() => closed.has('/endless.png'));
  const sent = streamed.get('/endless.png');
  // the server could write its socket buffers full before it saw the stream cancelled
  assert.ok(sent < 8 * MiB + 16 * MiB, `the server wrote ${(sent / MiB).toFixed(1)} MiB before the reader stopped`);
  const grew = (process.memoryUsage().rss - t0) / MiB;
  t.diagnostic(`a figure of an endless body: the server wrote ${(sent / MiB).toFixed(1)} MiB before the cancel, RSS grew ${grew.toFixed(1)} MiB (cap 8 MiB)`);

  r = await received(() => pageFetch('https://evil.example/declared.png', { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch }));
  assert.ok(refusal('too_large_declared')(r.error), String(r.error));
  assert.deepEqual(r.error.values, [100, 8]);

  // a caption track is cut at its cap instead, and says so
  const cap = await pageFetch('https://evil.example/endless.vtt', { kind: 'caption', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch });
  assert.equal(cap.bytes.length, FETCH_LIMITS.caption.maxBytes);
  assert.equal(cap.truncated, true);
});

async function waitFor(fn, ms = 5000) {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('a body that trickles is stopped by the time limit', async () => {
  const b = browser();
  const t0 = Date.now();
  const { error } = await received(() => pageFetch('https://evil.example/slow.png', { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl, watch: b.watch, timeoutMs: 400 }));
  assert.ok(refusal('timeout')(error), String(error));
  assert.deepEqual(error.values, ['https://evil.example/slow.png', 0.4]);
  assert.ok(Date.now() - t0 < 10_000);
  // and a caller's signal (all figures' time) stops it too
  const gone = AbortSignal.abort();
  const again = await received(() => pageFetch('https://evil.example/article.png', { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl, signal: gone }));
  assert.equal(again.error?.code, 'fetch_failed');
});

test('a media type not wanted is refused before its body is read; an HTTP error says its status', async () => {
  const b = browser();
  const image = (type) => type.startsWith('image/');
  let r = await received(() => pageFetch('https://evil.example/page.html', { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl, accept: image }));
  assert.ok(refusal('wrong_type')(r.error));
  assert.deepEqual(r.error.values, ['text/html']);
  r = await received(() => pageFetch('https://evil.example/missing.png', { kind: 'figure', tabUrl: TAB, fetchImpl: b.fetchImpl }));
  assert.equal(r.error.reason, 'download_http');
  assert.deepEqual(r.error.values, [404]);
});

test('plain node fetch (a readable Location): the same rules, on 127.0.0.1 as the tab', async () => {
  const tab = `http://127.0.0.1:${PORT}/`;
  // node sends Host: 127.0.0.1:PORT, so the server's routes by name do not apply: check redirects by hand
  const srv = http.createServer((q, s) => {
    if (q.url === '/a') s.writeHead(302, { location: '/b' }).end();
    else if (q.url === '/b') s.writeHead(200, { 'content-type': 'image/png' }).end('b');
    else if (q.url === '/away') s.writeHead(302, { location: `http://localhost:${PORT}/b` }).end();
    else s.writeHead(404).end();
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${srv.address().port}`;
  try {
    const ok = await pageFetch(`${base}/a`, { kind: 'figure', tabUrl: `${base}/`, fetchImpl: fetch });
    assert.equal(ok.url, `${base}/b`);
    const before = requests.length;
    await assert.rejects(pageFetch(`${base}/away`, { kind: 'figure', tabUrl: tab, fetchImpl: fetch }), refusal('redirect_other_origin'));
    assert.equal(requests.length, before, 'localhost was not asked');
  } finally {
    srv.close();
  }
});

test('every refusal has words in the UI language', () => {
  const cases = {
    scheme: ['ftp://x/'],
    private_address: ['http://camera.lan/x.png'],
    private_ip: ['http://intranet.example/x.pdf', '10.0.0.5'],
    redirect_other_origin: ['https://evil.example/p.pdf', 'http://intranet.example/p.pdf'],
    too_many_redirects: ['https://evil.example/loop', 5],
    wrong_type: ['text/html'],
    timeout: ['https://evil.example/slow.png', 20],
    too_large_declared: [100, 8],
    too_large: [8],
    download_http: [404],
    download_failed: ['Failed to fetch'],
  };
  for (const [reason, values] of Object.entries(cases)) {
    const words = pageFetchMessage(new PageFetchError('fetch_refused', reason, values));
    assert.ok(words && !words.includes('$') && words !== reason, `${reason}: ${words}`);
    for (const v of values) assert.ok(words.includes(String(v)), `${reason} names ${v}: ${words}`);
  }
  assert.equal(pageFetchMessage({ reason: 'private_address', values: ['http://camera.lan/x.png'] }), 'Keepsake did not fetch http://camera.lan/x.png: it is an address on your own network or this computer, and the page you are reading is not.');
});

// ---- the request watch (chrome.webRequest) -------------------------------------------------------

/** chrome.webRequest's events as a test drives them. */
function fakeWebRequest() {
  const events = {};
  const wr = {};
  for (const name of ['onBeforeRequest', 'onHeadersReceived', 'onBeforeRedirect', 'onResponseStarted', 'onErrorOccurred']) {
    events[name] = new Set();
    wr[name] = { addListener: (fn) => events[name].add(fn), removeListener: (fn) => events[name].delete(fn) };
  }
  const fire = (name, d) => {
    for (const fn of events[name]) fn({ tabId: -1, initiator: 'chrome-extension://abc', timeStamp: Date.now(), ...d });
  };
  return { chrome: { webRequest: wr, runtime: { getURL: (p) => `chrome-extension://abc/${p}` } }, events, fire };
}

test('the watch: listeners only while held (then a linger), a request\'s redirect target and server address, only this extension\'s own requests', async () => {
  const f = fakeWebRequest();
  const watch = createRequestWatch({ chrome: f.chrome, waitMs: 200, lingerMs: 30 });
  assert.equal(watch.listening, false, 'no listener until a fetch needs it: the worker is never woken for them');
  const release = watch.hold();
  assert.equal(f.events.onBeforeRequest.size, 1);
  const since = Date.now();
  const pending = watch.outcome('https://evil.example/cross.pdf', { since });
  // another extension's request, and a tab's, for the same URL: not ours
  f.fire('onBeforeRequest', { requestId: '1', url: 'https://evil.example/cross.pdf', initiator: 'chrome-extension://other' });
  f.fire('onBeforeRedirect', { requestId: '1', url: 'https://evil.example/cross.pdf', initiator: 'chrome-extension://other', ip: '1.1.1.1', redirectUrl: 'https://x/' });
  f.fire('onBeforeRequest', { requestId: '2', url: 'https://evil.example/cross.pdf', tabId: 4 });
  f.fire('onBeforeRequest', { requestId: '3', url: 'https://evil.example/cross.pdf' });
  f.fire('onBeforeRedirect', { requestId: '3', url: 'https://evil.example/cross.pdf', ip: '127.0.0.1', statusCode: 302, redirectUrl: 'http://intranet.example/private.pdf' });
  assert.deepEqual(await pending, { ip: '127.0.0.1', status: 302, redirectUrl: 'http://intranet.example/private.pdf' });
  // a response: its server's address; nothing reported in time: null
  f.fire('onBeforeRequest', { requestId: '4', url: 'https://cdn.example/a.png' });
  f.fire('onResponseStarted', { requestId: '4', url: 'https://cdn.example/a.png', ip: '10.0.0.5', statusCode: 200 });
  assert.deepEqual(await watch.outcome('https://cdn.example/a.png', { since }), { ip: '10.0.0.5', status: 200 });
  assert.equal(await watch.outcome('https://cdn.example/never.png', { since }), null);
  // Firefox: a `manual` redirect ends in onResponseStarted (status 302); its Location came with the headers
  f.fire('onBeforeRequest', { requestId: '5', url: 'https://evil.example/a.pdf', initiator: undefined, originUrl: 'chrome-extension://abc/_generated_background_page.html' });
  f.fire('onHeadersReceived', { requestId: '5', url: 'https://evil.example/a.pdf', initiator: undefined, originUrl: 'chrome-extension://abc/_generated_background_page.html', statusCode: 302, responseHeaders: [{ name: 'Location', value: '/files/a.pdf' }] });
  f.fire('onResponseStarted', { requestId: '5', url: 'https://evil.example/a.pdf', initiator: undefined, originUrl: 'chrome-extension://abc/_generated_background_page.html', statusCode: 302, ip: '127.0.0.1' });
  assert.deepEqual(await watch.outcome('https://evil.example/a.pdf', { since }), { ip: '127.0.0.1', status: 302, redirectUrl: 'https://evil.example/files/a.pdf' });
  release();
  assert.equal(watch.listening, true, 'kept a moment for the next fetch');
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(watch.listening, false);
  assert.equal(f.events.onBeforeRequest.size, 0);
  assert.equal(createRequestWatch({ chrome: {} }), null, 'no chrome.webRequest: no watch');
});

test('the watch: a browser that never reports this extension\'s requests is waited for once only', async () => {
  const f = fakeWebRequest();
  const watch = createRequestWatch({ chrome: f.chrome, waitMs: 150, lingerMs: 10 });
  const release = watch.hold();
  let t0 = Date.now();
  assert.equal(await watch.outcome('https://a.example/1', { since: t0 }), null);
  assert.ok(Date.now() - t0 >= 140);
  t0 = Date.now();
  assert.equal(await watch.outcome('https://a.example/2', { since: t0 }), null);
  assert.ok(Date.now() - t0 < 100, 'blind: not waited for again');
  release();
});
