// The page-driven fetches (issue 30, items 1 and 3; lib/page-fetch.js) in the real Chromium, the real
// worker and offscreen document and the real host, checked against what each server received and
// what the SQLite file holds. Three sites on 127.0.0.1, each its own server, reached by name:
// `--host-resolver-rules` maps evil.example, intranet.example (a public-looking name on the
// reader's network) and camera.lan to them. Every request each server gets is logged with its
// cookie and Accept header.
//
//   (a) the intranet sets an HttpOnly, SameSite=Strict session cookie when visited; a page served as
//       HTML at http://evil.example/article.pdf answers any other request for that address with a
//       302 to the intranet's private PDF. "Attach page" attaches the HTML page it is: the intranet
//       receives nothing, nothing of it is stored, the URL line names the page. "Attach this PDF"
//       on a link that redirects to the intranet: refused with its reason in the panel, the
//       intranet receives nothing; on a link that redirects within its site: attached, the URL
//       line naming the address the bytes came from.
//   (b) an article on evil.example with figures on camera.lan and intranet.example and a <track> on
//       camera.lan (the page's own CSP keeps the page from loading them itself): camera.lan's
//       server receives no request at all, the intranet's figure (its server turned out to be at a
//       private address, as chrome.webRequest reported) is not attached and its cookie never sent;
//       the article's own figure is.
//   (c) a figure that streams 1.5 GiB (made on the fly, no Content-Length): the attach finishes, the
//       figure is refused, and the peak RSS of the extension's process (the renderer running the
//       service worker: /proc cmdline `--extension-process` under this browser, polled every 25 ms)
//       is printed against the target "the cap (8 MiB) plus a small constant", beside the growth of
//       attaching the same article without the picture; asserted only below 512 MiB of growth (the
//       code before issue 30 read the whole body: 3.2 GB).
//
// Run: tests/e2e/run.sh page-fetch.e2e.mjs (old code: KEEPSAKE_E2E_EXT_DIR=/work/base/extension …).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';

import { withKeepsake, waitFor, sleep } from './harness.mjs';
import { makePng } from './fixtures.mjs';
import { tid, chips } from './panel.mjs';
import { live } from './db.mjs';
import { makePdf } from './pdf-fixture.mjs';

const MiB = 1024 * 1024;
const PARAS = Array.from({ length: 6 }, (_, i) => `<p>Paragraph ${i + 1} of the harbour story: the keepers wrote down every change of the tide, every ship that passed the point, and every repair of the great lens.</p>`).join('\n');
const SECRET_PDF = makePdf({ pages: 1, title: 'Intranet payroll (private)', author: 'Intranet HR' });

/**
 * One site: an HTTP server on 127.0.0.1 answering `routes[path](req, res)`, logging every request
 * (path, cookie, Accept). `name` is what the browser calls it.
 */
async function site(name, routes) {
  const log = [];
  const server = http.createServer((req, res) => {
    log.push({ path: req.url, cookie: req.headers.cookie ?? '', accept: req.headers.accept ?? '' });
    const route = routes[new URL(req.url, 'http://x').pathname];
    if (route) route(req, res);
    else res.writeHead(404).end('not found');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return {
    name,
    port,
    log,
    origin: `http://${name}`,
    rule: `MAP ${name}:80 127.0.0.1:${port}`,
    close: () => new Promise((r) => {
      server.closeAllConnections?.();
      server.close(() => r());
    }),
  };
}

const html = (body, { csp = '', cookie = '' } = {}) => (req, res) => {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', ...(csp ? { 'content-security-policy': csp } : {}), ...(cookie ? { 'set-cookie': cookie } : {}) });
  // an icon of its own (empty, inline) keeps the browser from asking for /favicon.ico with the
  // site's cookies some time after the tab loaded: that request is the browser's, not ours
  res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">${body}</html>`);
};
const bytes = (type, body) => (req, res) => res.writeHead(200, { 'content-type': type, 'content-length': body.length }).end(body);
const redirect = (to) => (req, res) => res.writeHead(302, { location: to }).end();

/** The three sites and the browser switches that name them. */
async function sites(evilRoutes) {
  const intranet = await site('intranet.example', {
    '/login': html('<title>Intranet</title></head><body><p>Signed in.</p></body>', { cookie: 'sid=SECRET; HttpOnly; SameSite=Strict; Path=/' }),
    '/private.pdf': bytes('application/pdf', SECRET_PDF),
    '/chart.png': bytes('image/png', makePng(640, 400, { seed: 9 })),
  });
  const camera = await site('camera.lan', {
    '/snapshot.png': bytes('image/png', makePng(640, 400, { seed: 7 })),
    '/captions.vtt': bytes('text/vtt', Buffer.from('WEBVTT\n\n00:00.000 --> 00:03.000\nThe camera sees the hall.\n')),
  });
  const evil = await site('evil.example', evilRoutes);
  const all = [evil, intranet, camera];
  return {
    evil,
    intranet,
    camera,
    browserArgs: [`--host-resolver-rules=${all.map((s) => s.rule).join(', ')}`],
    close: () => Promise.all(all.map((s) => s.close())),
  };
}

/** Sign in to the intranet in a tab of its own: the browser now holds its session cookie. */
async function signIn(k, intranet) {
  const tab = await k.context.newPage();
  await tab.goto(`${intranet.origin}/login`);
  const cookies = await k.context.cookies(intranet.origin);
  assert.deepEqual(cookies.map((c) => [c.name, c.httpOnly, c.sameSite]), [['sid', true, 'Strict']], 'the intranet set its session cookie');
  await tab.close();
  return intranet.log.length;
}

/** The panel's note after an attach (composer-note), once it says `pattern`. */
function noteMatching(panel, pattern, what) {
  return waitFor(async () => {
    const n = panel.locator(tid('composer-note'));
    const text = (await n.isVisible()) ? await n.textContent() : '';
    return pattern.test(text) ? text : null;
  }, { timeoutMs: 30_000, what });
}

test('(a) an HTML page at …/article.pdf and PDF links that redirect: the intranet is never asked, never with its cookie; the URL line names where the bytes came from', { timeout: 180_000 }, async (t) => {
  const s = await sites({
    // the page itself, to the browser's navigation (it asks for HTML; plain http has no Sec-Fetch-Dest);
    // any other request for this address: a 302 to the intranet's PDF
    '/article.pdf': (req, res) =>
      String(req.headers.accept ?? '').includes('text/html')
        ? html(`<title>A harmless article</title></head><body><main><article><h1>A harmless article</h1>${PARAS}</article></main></body>`)(req, res)
        : redirect('http://intranet.example/private.pdf')(req, res),
    '/links.html': html('<title>Reading list</title></head><body><p><a href="/paper.pdf">Paper</a> <a href="/report.pdf">Report</a></p></body>'),
    '/paper.pdf': redirect('http://intranet.example/private.pdf'),
    '/report.pdf': redirect('/files/report.pdf'),
    '/files/report.pdf': bytes('application/pdf', makePdf({ pages: 2, title: 'Harbour report' })),
  });
  try {
    await withKeepsake(t, { browserArgs: s.browserArgs }, async (k) => {
      const signedIn = await signIn(k, s.intranet);
      const tab = await k.context.newPage();
      await tab.goto(`${s.evil.origin}/article.pdf`);
      assert.equal(await tab.evaluate(() => document.contentType), 'text/html');

      const panel = await k.openPanel();
      await panel.click(tid('attach-page'));
      // the attach finishes one way or the other: a chip, or a note saying why not
      await waitFor(async () => (await chips(panel)).some((c) => c.attachId) || /Could not attach/.test(await panel.innerText(tid('composer-note')).catch(() => '')), { timeoutMs: 30_000, what: 'the attach to finish' });
      const asked = s.intranet.log.slice(signedIn);
      t.diagnostic(`intranet requests after "Attach page": ${JSON.stringify(asked)}`);
      assert.deepEqual(asked.filter((r) => r.cookie.includes('sid=SECRET')), [], 'the intranet never received its session cookie');
      assert.deepEqual(asked, [], 'the intranet received no request at all');
      const rows = live(k);
      assert.equal(rows.length, 1, 'the page was attached');
      const text = rows[0].text;
      t.diagnostic(`stored: ${JSON.stringify(text.slice(0, 300))}`);
      assert.ok(!text.includes('Intranet payroll') && !text.includes('Intranet HR'), 'nothing of the intranet is stored');
      assert.match(text, /^URL: http:\/\/evil\.example\/article\.pdf$/m, 'the URL line names the page the bytes came from');
      assert.doesNotMatch(text, /^Mode: pdf$/m, 'read as the HTML page it is');
      assert.ok(text.includes('Paragraph 3 of the harbour story'));
      assert.equal(rows[0].image_count, 0);

      // "Attach this PDF" (what Chrome passes for the menu click) on links of evil.example's page
      await panel.click(tid('attach-undo'));
      await waitFor(async () => (live(k).length === 0 ? true : null), { timeoutMs: 10_000, what: 'the attach taken off' });
      const links = await k.context.newPage();
      await links.goto(`${s.evil.origin}/links.html`);
      const clickLink = (href) =>
        k.worker.evaluate(async ([pageUrl, linkUrl]) => {
          const [tab] = await chrome.tabs.query({ url: pageUrl });
          return self.__keepsake.selection.clicked({ menuItemId: 'keepsake-pdf-link', parentMenuItemId: 'keepsake', linkUrl, frameId: 0, pageUrl, editable: false }, tab);
        }, [`${s.evil.origin}/links.html`, `${s.evil.origin}${href}`]);
      await clickLink('/paper.pdf');
      const note = await noteMatching(panel, /Could not attach|Attached/, 'the note for the redirecting link');
      t.diagnostic(`panel note: ${note}`);
      const askedAgain = s.intranet.log.slice(signedIn);
      assert.deepEqual(askedAgain.filter((r) => r.cookie.includes('sid=SECRET')), [], 'the intranet never received its session cookie');
      assert.deepEqual(askedAgain, [], 'a redirect to another site is not followed: the intranet received nothing');
      assert.match(note, /redirected to another site \(http:\/\/intranet\.example\/private\.pdf\)/, 'the panel says why');
      assert.deepEqual(live(k), [], 'nothing stored');

      // a link that redirects within its own site: followed, and the URL line names where the bytes came from
      await clickLink('/report.pdf');
      await waitFor(async () => (live(k).length === 1 ? true : null), { timeoutMs: 30_000, what: 'the report attached' });
      const report = live(k)[0].text;
      assert.match(report, /^Title: Harbour report$/m);
      assert.match(report, /^URL: http:\/\/evil\.example\/files\/report\.pdf$/m, 'the address the bytes came from');
      assert.deepEqual(s.evil.log.filter((r) => r.path.endsWith('report.pdf')).map((r) => r.path), ['/report.pdf', '/files/report.pdf']);
    });
  } finally {
    await s.close();
  }
});

test('(b) an article naming camera.lan and an intranet host: camera.lan is never asked, neither picture is attached, the article\'s own is', { timeout: 150_000 }, async (t) => {
  const s = await sites({
    '/camera.html': html(
      `<title>The hall</title></head><body><main><article><h1>The hall</h1>${PARAS}
<figure><img src="http://camera.lan/snapshot.png" width="640" height="400"><figcaption>The camera picture</figcaption></figure>
<figure><img src="http://intranet.example/chart.png" width="640" height="400"><figcaption>The intranet chart</figcaption></figure>
<figure><img src="/lamp.png" width="640" height="400"><figcaption>The lamp room</figcaption></figure>
<video src="/clip.webm" width="320" height="180"><track kind="captions" srclang="en" label="English" src="http://camera.lan/captions.vtt" default></video>
${PARAS}</article></main></body>`,
      // the page itself may not load them: only what the extension fetches reaches those servers
      { csp: "img-src 'self'; media-src 'self'" },
    ),
    '/lamp.png': bytes('image/png', makePng(640, 400, { seed: 3 })),
  });
  try {
    await withKeepsake(t, { browserArgs: s.browserArgs }, async (k) => {
      const signedIn = await signIn(k, s.intranet);
      const tab = await k.context.newPage();
      await tab.goto(`${s.evil.origin}/camera.html`);
      assert.deepEqual(s.camera.log, [], 'the page itself did not load anything from camera.lan');
      const panel = await k.openPanel();
      await panel.click(tid('attach-page'));
      await waitFor(async () => (await chips(panel)).find((c) => c.attachId), { timeoutMs: 30_000, what: 'the attach chip' });
      t.diagnostic(`camera.lan requests: ${JSON.stringify(s.camera.log)}; intranet requests: ${JSON.stringify(s.intranet.log.slice(signedIn))}`);
      assert.deepEqual(s.camera.log, [], 'no request reached camera.lan');
      assert.deepEqual(s.intranet.log.slice(signedIn).filter((r) => r.cookie.includes('sid=SECRET')), [], "the intranet's cookie was never sent");
      const row = live(k)[0];
      t.diagnostic(`stored: ${JSON.stringify(row.text.slice(row.text.indexOf('The hall'), row.text.indexOf('The hall') + 120))}…`);
      assert.match(row.text, /\(Picture not attached: The camera picture\)/);
      assert.match(row.text, /\(Picture not attached: The intranet chart\)/, 'its server turned out to be at a private address');
      assert.match(row.text, /^\[Figure 1\] The lamp room$/m, "the article's own picture is attached");
      assert.equal(row.image_count, 1);
      assert.doesNotMatch(row.text, /## Transcript|The camera sees the hall/, 'no caption track from camera.lan');
    });
  } finally {
    await s.close();
  }
});

/** Processes under `ancestor` whose command line says `--extension-process` (extension renderers). */
function extensionProcesses(ancestor) {
  const parent = new Map();
  const cmd = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      cmd.set(Number(d), fs.readFileSync(`/proc/${d}/cmdline`, 'utf8'));
    } catch {
      /* gone */
    }
  }
  const under = (pid) => {
    for (let p = pid, n = 0; p > 1 && n < 64; p = parent.get(p), n++) if (p === ancestor) return true;
    return false;
  };
  return [...cmd].filter(([pid, c]) => c.includes('--extension-process') && under(pid)).map(([pid]) => pid);
}

/** VmRSS and VmHWM of a process, in MiB (null when it is gone). */
function memoryOf(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field) => Number(status.match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'))?.[1] ?? NaN);
    return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
  } catch {
    return null;
  }
}

test('(c) a figure that streams 1.5 GiB: the attach finishes, the figure is refused, the extension process stays near its size (peak RSS printed)', { timeout: 300_000 }, async (t) => {
  const TOTAL = 1.5 * 1024 * MiB;
  let sent = 0;
  let stoppedAt = null;
  const s = await sites({
    '/huge.html': html(
      `<title>A very large picture</title></head><body><main><article><h1>A very large picture</h1>${PARAS}
<figure><img src="/huge.png" width="640" height="400"><figcaption>The huge picture</figcaption></figure>${PARAS}</article></main></body>`,
      { csp: "img-src 'none'" }, // only the extension asks for it
    ),
    '/plain.html': html(`<title>The same article</title></head><body><main><article><h1>The same article</h1>${PARAS}${PARAS}</article></main></body>`),
    // 1.5 GiB made on the fly, no Content-Length, written as fast as the reader takes it
    '/huge.png': (req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' });
      const chunk = Buffer.alloc(MiB, 0x5a);
      const pump = () => {
        while (sent < TOTAL) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', () => (stoppedAt ??= sent));
      pump();
    },
  });
  try {
    await withKeepsake(t, { browserArgs: s.browserArgs }, async (k) => {
      const panel = await k.openPanel();
      const pids = await waitFor(() => {
        const p = extensionProcesses(k.browserPid);
        return p.length ? p : null;
      }, { timeoutMs: 10_000, what: 'the extension process' });
      /** Attach the page at `path` while polling the extension processes' RSS: the largest growth (MiB) and the time. */
      const attachMeasured = async (path) => {
        const tab = await k.context.newPage();
        await tab.goto(`${s.evil.origin}${path}`);
        await panel.bringToFront();
        const before = new Map(pids.map((p) => [p, memoryOf(p)?.rss ?? 0]));
        const peak = new Map(before);
        let polling = true;
        const poll = (async () => {
          while (polling) {
            for (const p of pids) {
              const m = memoryOf(p);
              if (m) peak.set(p, Math.max(peak.get(p), m.rss));
            }
            await sleep(25);
          }
        })();
        const t0 = Date.now();
        const had = live(k).length;
        await panel.click(tid('attach-page'));
        // bounded: the code before issue 30 reads the whole 1.5 GiB first
        const done = await waitFor(() => (live(k).length > had ? true : null), { timeoutMs: 120_000, what: `the attach of ${path}` }).catch((e) => e);
        const ms = Date.now() - t0;
        polling = false;
        await poll;
        await tab.close();
        const growth = Math.max(...pids.map((p) => peak.get(p) - before.get(p)));
        return { done, ms, growth, report: pids.map((p) => `pid ${p}: ${before.get(p).toFixed(0)} → peak ${peak.get(p).toFixed(0)} MiB, VmHWM ${memoryOf(p)?.hwm.toFixed(0)} MiB`).join('; ') };
      };
      // the same article without the picture first: what an attach costs the process anyway
      const control = await attachMeasured('/plain.html');
      const huge = await attachMeasured('/huge.html');
      t.diagnostic(
        `extension process RSS growth: attach with the 1.5 GiB figure ${huge.growth.toFixed(0)} MiB (${huge.report}), the same article without it ${control.growth.toFixed(0)} MiB; ` +
          `target: the 8 MiB cap plus a small constant; bound 512 MiB. The server sent ${((stoppedAt ?? sent) / MiB).toFixed(0)} MiB before the reader stopped; attach ${huge.ms} ms`,
      );
      assert.ok(!(huge.done instanceof Error), `the attach finished within 120 s (${huge.done?.message ?? ''})`);
      assert.ok(huge.growth < 512, `extension process growth ${huge.growth.toFixed(0)} MiB < 512 MiB`);
      assert.ok((stoppedAt ?? sent) < 256 * MiB, 'the download was cancelled soon after the cap');
      const row = live(k).at(-1);
      assert.match(row.text, /\(Picture not attached: The huge picture\)/);
      assert.equal(row.image_count, 0);
    });
  } finally {
    await s.close();
  }
});
