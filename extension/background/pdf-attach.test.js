// node --test extension/background/pdf-attach.test.js
//
// PDFs for chat.attachPage (pdf-attach.js): the attach arguments made from a read (metadata
// header, `[Page N]` text, figures within the per-turn caps), and the reader's offscreen document
// (opened for one read, closed after, one read at a time; each hop of the fetch one question, the
// rules of lib/page-fetch.js applied by the worker), with a fake chrome. The real document and
// PDF.js: tests/e2e/reading.e2e.mjs (b); the rules against a real server: lib/page-fetch.test.js,
// tests/e2e/page-fetch.e2e.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { createPdfReader, figuresSection, pdfAttachArgs, pdfErrorMessage } from './pdf-attach.js';

const fig = (page, chars) => ({ page, dataUrl: `data:image/jpeg;base64,${'A'.repeat(chars)}`, width: 100, height: 80 });
const READ = {
  numPages: 3,
  pagesRead: 3,
  info: { title: ' The  harbour\npaper ', author: 'The Keeper', subject: '', keywords: 'tides, lamps', created: '2026-11-30' },
  text: '[Page 1]\nOne.\n\n[Page 2]\nTwo.\n\n[Page 3]\nThree.',
  figures: [fig(1, 100), fig(3, 100)],
  figuresFound: 2,
  truncated: false,
};
const LIMITS = { turnMaxImages: 8, turnImageBudget: 3 * 1024 * 1024 };

test('the attach: mode pdf, paper, the metadata header, the page text, the figures after it', () => {
  const args = pdfAttachArgs(READ, { url: 'https://me:pw@a.example/papers/harbour.pdf', tabTitle: 'harbour.pdf', limits: LIMITS });
  assert.deepEqual(args, {
    ctx: {
      url: 'https://a.example/papers/harbour.pdf',
      title: 'The harbour paper',
      mode: 'pdf',
      header: 'Author: The Keeper\nKeywords: tides, lamps\nCreated: 2026-11-30\nPages: 3\nFigures: 2, after the text (pages 1, 3)\n',
      body: `${READ.text}\n\n## Figures\nThe pictures attached with this text, in order:\n1. Figure on page 1\n2. Figure on page 3`,
    },
    paper: true,
    images: READ.figures.map((f) => f.dataUrl),
    placement: 'end',
  });
});

test('no title in the PDF: the tab title, then the file name; no figures: no images and no Figures line', () => {
  const bare = { ...READ, info: {}, figures: [], figuresFound: 0 };
  let args = pdfAttachArgs(bare, { url: 'https://a.example/papers/tide%20tables.pdf', tabTitle: 'Tide tables' });
  assert.equal(args.ctx.title, 'Tide tables');
  assert.equal(args.ctx.header, 'Pages: 3\n');
  assert.equal(args.images, undefined);
  assert.equal(args.placement, undefined);
  args = pdfAttachArgs(bare, { url: 'https://a.example/papers/tide%20tables.pdf' });
  assert.equal(args.ctx.title, 'tide tables.pdf');
});

test('figures beyond the per-turn caps stay out, and the header says how many were found', () => {
  const many = { ...READ, figures: [fig(1, 100), fig(2, 2 * 1024 * 1024), fig(4, 2 * 1024 * 1024), fig(5, 100)], figuresFound: 12 };
  const args = pdfAttachArgs(many, { url: 'https://a.example/p.pdf', limits: LIMITS });
  // first fit by URL chars: the second big one would pass 3 MiB
  assert.equal(args.images.length, 3);
  assert.match(args.ctx.header, /^Figures: 3 of 12 attached, after the text \(pages 1, 2, 5\); the per-turn picture limits hold the rest$/m);
  const capped = pdfAttachArgs({ ...READ, figures: Array.from({ length: 5 }, (_, i) => fig(i + 1, 10)), figuresFound: 5 }, { url: 'https://a.example/p.pdf', limits: { ...LIMITS, turnMaxImages: 2 } });
  assert.equal(capped.images.length, 2);
});

test('a PDF cut short says how many pages were read', () => {
  const args = pdfAttachArgs({ ...READ, numPages: 900, pagesRead: 610 }, { url: 'https://a.example/p.pdf' });
  assert.match(args.ctx.header, /^Pages: 610 of 900 read \(the rest is over the size Keepsake sends\)$/m);
});

function fakeOffscreen({ reply, delayMs = 0 } = {}) {
  const log = [];
  let open = false;
  const chrome = {
    offscreen: {
      hasDocument: async () => open,
      createDocument: async (o) => {
        assert.equal(open, false, 'one document at a time');
        log.push(['create', o.url, o.reasons]);
        open = true;
      },
      closeDocument: async () => {
        log.push('close');
        open = false;
      },
    },
    runtime: {
      sendMessage: async (msg) => {
        log.push(['ask', msg]);
        await new Promise((r) => setTimeout(r, delayMs));
        return typeof reply === 'function' ? reply(msg) : reply;
      },
    },
  };
  return { chrome, log, get open() {
    return open;
  } };
}

/** The question the worker asks the offscreen document for one hop (the deadline checked apart). */
function asked(entry) {
  const { deadline, ...rest } = entry[1];
  assert.ok(deadline > Date.now() && deadline <= Date.now() + 120_000, 'the PDF time limit, 2 minutes');
  return rest;
}

test('the reader opens the offscreen document for one read and closes it, also when the read fails', async () => {
  const f = fakeOffscreen({ reply: { ok: true, result: READ } });
  const reader = createPdfReader({ chrome: f.chrome });
  assert.deepEqual(await reader.read('https://a.example/p.pdf', { maxFigures: 4, tabUrl: 'https://a.example/p.pdf' }), { ...READ, url: 'https://a.example/p.pdf' });
  assert.deepEqual(f.log[0], ['create', 'offscreen/pdf.html', ['WORKERS']]);
  assert.deepEqual(asked(f.log[1]), { kind: 'pdf.read', url: 'https://a.example/p.pdf', credentials: 'include', redirect: 'manual', maxFigures: 4 });
  assert.equal(f.log[2], 'close');
  assert.equal(f.open, false);

  const bad = fakeOffscreen({ reply: { ok: false, error: { code: 'fetch_too_large', message: 'The PDF is 120 MiB' } } });
  await assert.rejects(createPdfReader({ chrome: bad.chrome }).read('https://a.example/p.pdf'), { code: 'fetch_too_large', message: 'The PDF is 120 MiB' });
  assert.equal(bad.open, false);
  const silent = fakeOffscreen({ reply: undefined });
  await assert.rejects(createPdfReader({ chrome: silent.chrome }).read('https://a.example/p.pdf'), { code: 'pdf_unreadable' });
  await assert.rejects(createPdfReader({ chrome: {} }).read('https://a.example/p.pdf'), { code: 'pdf_unreadable' });
});

test('in Firefox (no offscreen documents) a PDF attach says it is not available there yet', async () => {
  const firefox = { runtime: { getURL: (p) => `moz-extension://u/${p}`, sendMessage: async () => assert.fail('nothing is asked') } };
  await assert.rejects(createPdfReader({ chrome: firefox }).read('https://a.example/p.pdf'), (e) => {
    assert.equal(e.code, 'pdf_unreadable');
    assert.match(e.message, /not available in Firefox/);
    return true;
  });
});

test('the reader errors are worded here, in the UI language (the offscreen document has no chrome.i18n)', async () => {
  const bad = fakeOffscreen({ reply: { ok: false, error: { code: 'fetch_too_large', message: 'too_large_declared: 120, 96', reason: 'too_large_declared', values: [120, 96] } } });
  await assert.rejects(createPdfReader({ chrome: bad.chrome }).read('https://a.example/p.pdf'), {
    code: 'fetch_too_large',
    message: 'The PDF is 120 MiB; Keepsake reads PDFs up to 96 MiB.',
  });
  assert.equal(pdfErrorMessage({ reason: 'download_http', values: [404] }), 'Could not download the PDF: HTTP 404');
  assert.equal(pdfErrorMessage({ reason: 'download_failed', values: ['Failed to fetch'] }), 'Could not download the PDF: Failed to fetch');
  assert.equal(pdfErrorMessage({ reason: 'too_large', values: [96] }), 'The PDF is over 96 MiB; Keepsake reads PDFs up to that size.');
  assert.equal(pdfErrorMessage({ reason: 'not_pdf', values: ['Invalid PDF structure.'] }), 'This is not a PDF Keepsake can read: Invalid PDF structure.');
  assert.equal(pdfErrorMessage(undefined), 'The PDF reader did not answer.');
  // a rule of lib/page-fetch.js, or its time limit: its own words
  assert.equal(pdfErrorMessage({ reason: 'timeout', values: ['https://a.example/p.pdf', 120] }), 'https://a.example/p.pdf did not finish downloading within 120 seconds.');
  assert.equal(
    pdfErrorMessage({ reason: 'redirect_other_origin', values: ['https://evil.example/p.pdf', 'http://intranet.example/x.pdf'] }),
    'https://evil.example/p.pdf redirected to another site (http://intranet.example/x.pdf); Keepsake does not follow redirects to another site.',
  );
});

/** A request watch that reports what a test says the browser saw for each URL. */
function fakeWatch(seen) {
  const held = [];
  return {
    held,
    hold: () => {
      held.push('hold');
      return () => held.push('release');
    },
    outcome: async (url) => seen[url] ?? null,
  };
}

test("each hop is one question; a redirect the watch saw is followed on the same origin only; cookies only to the tab's origin; the result names the last hop", async () => {
  // /a.pdf → /files/a.pdf on the same origin: followed, with the tab's cookies, and named
  const f = fakeOffscreen({ reply: (msg) => ({ ok: true, result: msg.url.endsWith('/a.pdf') && !msg.url.includes('/files/') ? { redirect: null } : { ...READ, url: msg.url } }) });
  const watch = fakeWatch({ 'https://a.example/a.pdf': { ip: '93.184.216.34', status: 302, redirectUrl: 'https://a.example/files/a.pdf' } });
  const got = await createPdfReader({ chrome: f.chrome, watch }).read('https://a.example/a.pdf', { tabUrl: 'https://a.example/list.html' });
  assert.equal(got.url, 'https://a.example/files/a.pdf');
  assert.deepEqual(f.log.filter((x) => x[0] === 'ask').map((x) => [x[1].url, x[1].credentials, x[1].redirect]), [
    ['https://a.example/a.pdf', 'include', 'manual'],
    ['https://a.example/files/a.pdf', 'include', 'manual'],
  ]);
  assert.deepEqual(watch.held, ['hold', 'release']);

  // a link to another origin: no cookies; its redirect to a third origin: refused, never asked for
  const g = fakeOffscreen({ reply: () => ({ ok: true, result: { redirect: null } }) });
  const w2 = fakeWatch({ 'https://papers.example/p.pdf': { ip: '93.184.216.34', status: 302, redirectUrl: 'http://intranet.example/private.pdf' } });
  await assert.rejects(createPdfReader({ chrome: g.chrome, watch: w2 }).read('https://papers.example/p.pdf', { tabUrl: 'https://evil.example/list.html' }), (e) => {
    assert.equal(e.code, 'fetch_refused');
    assert.equal(e.message, 'https://papers.example/p.pdf redirected to another site (http://intranet.example/private.pdf); Keepsake does not follow redirects to another site.');
    return true;
  });
  assert.deepEqual(g.log.filter((x) => x[0] === 'ask').map((x) => [x[1].url, x[1].credentials]), [['https://papers.example/p.pdf', 'omit']]);
  assert.equal(g.open, false);

  // the server turned out to be on the reader's network (a public-looking name): refused
  const h = fakeOffscreen({ reply: (msg) => ({ ok: true, result: { ...READ, url: msg.url } }) });
  const w3 = fakeWatch({ 'https://intranet.example/x.pdf': { ip: '10.0.0.5', status: 200 } });
  await assert.rejects(createPdfReader({ chrome: h.chrome, watch: w3 }).read('https://intranet.example/x.pdf', { tabUrl: 'https://evil.example/' }), (e) => {
    assert.equal(e.code, 'fetch_refused');
    assert.match(e.message, /^Keepsake did not use https:\/\/intranet\.example\/x\.pdf: its server is at 10\.0\.0\.5/);
    return true;
  });
});

test('a private address, or a scheme other than http(s): refused before the offscreen document opens', async () => {
  for (const url of ['http://camera.lan/x.pdf', 'http://127.0.0.1:8080/x.pdf', 'http://[::ffff:10.0.0.1]/x.pdf', 'http://intranet/x.pdf', 'ftp://a.example/x.pdf']) {
    const f = fakeOffscreen({ reply: () => assert.fail('nothing is asked') });
    await assert.rejects(createPdfReader({ chrome: f.chrome }).read(url, { tabUrl: 'https://evil.example/' }), (e) => e.code === 'fetch_refused', url);
    assert.deepEqual(f.log, [], `${url}: no document opened`);
  }
  // a tab on the reader's own network may read PDFs there
  const ok = fakeOffscreen({ reply: (msg) => ({ ok: true, result: { ...READ, url: msg.url } }) });
  assert.equal((await createPdfReader({ chrome: ok.chrome }).read('http://127.0.0.1:8080/x.pdf', { tabUrl: 'http://127.0.0.1:8080/' })).url, 'http://127.0.0.1:8080/x.pdf');
});

test('reads queue: the second waits for the first document to close', async () => {
  const f = fakeOffscreen({ reply: (msg) => ({ ok: true, result: { ...READ, text: msg.url } }), delayMs: 20 });
  const reader = createPdfReader({ chrome: f.chrome });
  const [a, b] = await Promise.all([reader.read('https://a.example/1.pdf'), reader.read('https://a.example/2.pdf')]);
  assert.deepEqual([a.text, b.text], ['https://a.example/1.pdf', 'https://a.example/2.pdf']);
  assert.deepEqual(f.log.map((x) => (Array.isArray(x) ? x[0] : x)), ['create', 'ask', 'close', 'create', 'ask', 'close']);
});

test('figuresSection: the labels the host reads, a missing caption named by its page', () => {
  assert.equal(figuresSection([]), '');
  assert.equal(
    figuresSection([{ caption: ' The  lamp\nroom ' }, { page: 4 }, {}]),
    '## Figures\nThe pictures attached with this text, in order:\n1. The lamp room\n2. Figure on page 4\n3. Figure on page ?',
  );
});
