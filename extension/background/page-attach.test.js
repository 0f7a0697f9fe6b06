// node --test extension/background/page-attach.test.js
//
// chat.attachPage through createPageAttach, with a fake chrome (the page's extracted text, the
// tab) and a fake host that records what it is asked to attach. The auto-summary hand-off and
// the real host are in turns.test.js.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { createPageAttach, unreadableReason, readYouTubePlayer, placeFigures } from './page-attach.js';

function setup({ live = null, page, tab = null, tabFails = false, change = null, summaryNeeded = false, settings = {}, summarize, fetchImpl, player, siteCache = null, language = 'en-US', pdfReader, hostLimits } = {}) {
  const attached = [];
  const tracked = [];
  const injected = [];
  const storage = {
    attach: {
      trackChange: async (args) => {
        tracked.push(args);
        if (change instanceof Error) throw change;
        return change ?? { changed: false };
      },
    },
    history: {
      attach: async (args) => {
        attached.push(args);
        // with `live`, the chat as the host keeps it: the attach entry with its §2.4 header
        live?.push({ role: 'user', attachId: `att-${attached.length}`, content: `[Page context attached by Keepsake]\nURL: ${args.ctx.url}\nTitle: ${args.ctx.title}\nMode: ${args.ctx.mode}\n---\n\n${args.ctx.body}` });
        return { attachId: 'att-1', index: 0, length: 1, ...(summaryNeeded ? { summary: { needed: true } } : {}) };
      },
      ...(live
        ? {
            meta: async () => ({ length: live.length }),
            get: async ({ from = 0 }) => ({ entries: live.slice(from), from, length: live.length }),
          }
        : {}),
    },
  };
  const chrome = {
    scripting: {
      executeScript: async function ({ target, func, files }) {
        if (files) {
          if (page === 'no injection') assert.fail('nothing is injected into a PDF tab');
          assert.deepEqual(files, ['vendor/readability/Readability.js'], 'Readability goes in first');
          injected.push(...files);
          return [{}];
        }
        if (func.name === 'readYouTubePlayer') {
          assert.equal(arguments[0].world, 'MAIN', "the player is read in the page's own world");
          if (player instanceof Error) throw player;
          return [{ result: player ?? null }];
        }
        assert.equal(func.name, 'extractReadablePage');
        assert.deepEqual(injected, ['vendor/readability/Readability.js']);
        assert.equal(target.tabId, 7);
        if (page instanceof Error) throw page;
        return [{ result: page }];
      },
    },
    tabs: {
      get: async (tabId) => {
        if (tabFails) throw new Error('No tab with id');
        return tab ? { id: tabId, ...tab } : { id: tabId };
      },
    },
  };
  const attachPage = createPageAttach({
    storage,
    chrome,
    readSettings: async () => settings,
    summarize: summarize ?? (async () => assert.fail('no summary expected')),
    fetchImpl: fetchImpl ?? (async (url) => assert.fail(`no fetch expected: ${url}`)),
    siteCache,
    language: () => language,
    ...(pdfReader ? { pdfReader } : {}),
    ...(hostLimits ? { hostLimits } : {}),
  });
  return { attach: (args = { tabId: 7 }) => attachPage(args), attached, tracked };
}

test("the tab's URL, credentials redacted, and the page's trimmed title; the text as the body", async () => {
  const s = setup({
    page: { title: ' T ', url: 'https://x/', text: 'body', hasVideo: false },
    tab: { url: 'https://u:p@example.com/a?b#c', title: 'Tab title' },
  });
  const r = await s.attach();
  assert.deepEqual(s.attached, [{ ctx: { url: 'https://example.com/a?b#c', title: 'T', mode: 'full', body: 'body' } }]);
  assert.deepEqual(s.tracked, [{ mode: 'full', url: 'https://example.com/a?b#c', text: 'body' }]);
  assert.deepEqual(r, { attachId: 'att-1', index: 0, length: 1, title: 'T', url: 'https://example.com/a?b#c', chars: 4, summarized: false });
});

test('without a page title the tab title, then the URL; without the tab the URL the page reports', async () => {
  let s = setup({ page: { title: '  ', text: '' }, tab: { url: 'https://e/', title: 'Tab title' } });
  await s.attach();
  assert.equal(s.attached[0].ctx.title, 'Tab title');
  s = setup({ page: { title: '', text: '' }, tab: { url: 'https://e/' } });
  await s.attach();
  assert.equal(s.attached[0].ctx.title, 'https://e/');
  s = setup({ page: { title: '', url: 'https://a:b@page.example/x', text: 'x' }, tabFails: true });
  await s.attach();
  assert.deepEqual(s.attached[0].ctx, { url: 'https://page.example/x', title: 'https://page.example/x', mode: 'full', body: 'x' });
});

test('a page with a video: videoSrc names its platform, the redacted URL and the tab', async () => {
  const cases = [
    ['https://u:p@www.youtube.com/watch?v=1', 'youtube', 'https://www.youtube.com/watch?v=1'],
    ['https://youtu.be/x', 'youtube', 'https://youtu.be/x'],
    ['https://www.bilibili.com/video/BV1', 'bilibili', 'https://www.bilibili.com/video/BV1'],
    ['https://b23.tv/x', 'bilibili', 'https://b23.tv/x'],
    ['https://example.com/v.mp4', 'html5', 'https://example.com/v.mp4'],
    ['https://notyoutube.com/v', 'html5', 'https://notyoutube.com/v'],
    ['not a url', 'html5', 'not a url'],
  ];
  for (const [url, platform, redacted] of cases) {
    const s = setup({ page: { title: 'V', text: 'b', hasVideo: true }, tab: { url } });
    await s.attach();
    assert.deepEqual(s.attached[0].videoSrc, { platform, url: redacted, tabId: 7 }, url);
  }
});

test('a page that changed since its last attach says since when (local time)', async () => {
  const at = new Date(2024, 0, 5, 9, 7).getTime();
  const s = setup({ page: { title: 'T', text: 'new' }, tab: { url: 'https://e/' }, change: { changed: true, previousAttachedAt: at } });
  await s.attach();
  assert.equal(s.attached[0].ctx.changedSince, '2024-01-05 09:07');
  // the change note is optional: a failing trackChange attaches without it
  const f = setup({ page: { title: 'T', text: 'new' }, tab: { url: 'https://e/' }, change: new Error('unknown op') });
  await f.attach();
  assert.equal('changedSince' in f.attached[0].ctx, false);
});

test('the body is cut at 3,000,000 characters', async () => {
  const s = setup({ page: { title: 'T', text: 'x'.repeat(3_000_005) }, tab: { url: 'https://e/' } });
  const r = await s.attach();
  assert.equal(s.attached[0].ctx.body.length, 3_000_000);
  assert.equal(r.chars, 3_000_000);
});

test('a page that cannot be read, or a bad tab id: attach_failed / bad_request, nothing attached', async () => {
  let s = setup({ page: new Error('Cannot access a chrome:// URL') });
  await assert.rejects(s.attach(), (e) => e.code === 'attach_failed' && /chrome:\/\//.test(e.message));
  s = setup({ page: null });
  await assert.rejects(s.attach(), (e) => e.code === 'attach_failed');
  await assert.rejects(s.attach({ tabId: 'x' }), (e) => e.code === 'bad_request');
  assert.deepEqual(s.attached, []);
});

test('a planned summary goes to the active provider unless turned off; its failure is reported, the attach kept', async () => {
  const settings = { providers: [{ id: 'p', name: 'P', kind: 'chat', baseUrl: 'https://x.example', apiKey: 'k', model: 'm' }] };
  const asked = [];
  let s = setup({
    page: { title: 'T', text: 'long' },
    summaryNeeded: true,
    settings,
    summarize: async (attachId, provider) => {
      asked.push([attachId, provider]);
      return true;
    },
  });
  assert.equal((await s.attach()).summarized, true);
  assert.deepEqual(asked, [['att-1', { kind: 'chat', baseUrl: 'https://x.example', apiKey: 'k', model: 'm' }]]);
  s = setup({ page: { title: 'T', text: 'long' }, summaryNeeded: true, settings: { ...settings, autoSummarizeAttachments: false } });
  assert.equal((await s.attach()).summarized, false);
  s = setup({ page: { title: 'T', text: 'long' }, summaryNeeded: true, settings: {} });
  const r = await s.attach();
  assert.equal(r.summarized, false);
  assert.equal(r.summaryError.code, 'no_provider');
  assert.equal(s.attached.length, 1);
});

test('pages the browser does not let an extension read are refused before anything is injected, saying why', async () => {
  for (const [url, why] of [
    ['chrome://version/', /its own chrome:\/\/ pages/],
    ['edge://settings', /its own edge:\/\/ pages/],
    ['about:blank', /its own about:\/\/ pages/],
    ['view-source:https://example.com/', /view-source/],
    ['chrome-extension://abc/page.html', /other extensions' pages/],
    ['https://chromewebstore.google.com/detail/x', /extension stores/],
    ['https://chrome.google.com/webstore/detail/x', /extension stores/],
    ['file:///home/me/notes.html', /Allow access to file URLs/],
  ]) {
    const s = setup({ page: { title: 'T', text: 'never read' }, tab: { url } });
    await assert.rejects(s.attach(), (e) => e.code === 'page_unreadable' && why.test(e.message), url);
    assert.deepEqual(s.attached, [], `${url}: nothing attached`);
  }
  // the rest of google.com, and a file URL with file access on, are read
  assert.equal(unreadableReason('https://chrome.google.com/intl/en/chrome/'), null);
  assert.equal(unreadableReason('https://example.com/a'), null);
  assert.equal(unreadableReason('file:///home/me/notes.html', { fileAccess: true }), null);
});

test("an article Readability found: mode article and its metadata in the header; the page's text: mode full", async () => {
  const article = {
    title: 'A title',
    text: 'Body',
    method: 'readability',
    byline: ' Ada\nLovelace ',
    siteName: 'The Site',
    publishedTime: '2026-01-02T03:04:05Z',
    canonicalUrl: 'https://u:p@example.com/canonical',
  };
  let s = setup({ page: article, tab: { url: 'https://example.com/a' } });
  await s.attach();
  assert.deepEqual(s.attached[0].ctx, {
    url: 'https://example.com/a',
    title: 'A title',
    mode: 'article',
    body: 'Body',
    header: 'Byline: Ada Lovelace\nSite: The Site\nPublished: 2026-01-02T03:04:05Z\nCanonical URL: https://example.com/canonical\n',
  });
  s = setup({ page: { ...article, byline: '', siteName: null, publishedTime: undefined, canonicalUrl: '' }, tab: { url: 'https://example.com/a' } });
  await s.attach();
  assert.equal(s.attached[0].ctx.header, undefined, 'no metadata, no header');
  s = setup({ page: { ...article, method: 'dom' }, tab: { url: 'https://example.com/a' } });
  await s.attach();
  assert.deepEqual(s.attached[0].ctx, { url: 'https://example.com/a', title: 'A title', mode: 'full', body: 'Body' });
});

test("a video's caption track: fetched by the worker, its cues stamped [mm:ss] after the text, named in the header", async () => {
  const vtt = 'WEBVTT\n\n00:00.000 --> 00:03.000\nThe lamp room.\n\n00:42.000 --> 00:45.000\n<v Edith>All well, light burning.\n';
  const fetched = [];
  const page = {
    title: 'Lamp',
    text: 'About the film.',
    hasVideo: true,
    lang: 'en',
    tracks: [
      { src: 'https://example.com/fr.vtt', kind: 'subtitles', lang: 'fr', label: 'Français', default: false },
      { src: 'https://example.com/en.vtt', kind: 'captions', lang: 'en', label: 'English', default: false },
    ],
  };
  const fetchImpl = async (url, opts) => {
    fetched.push([url, opts.credentials, opts.redirect]);
    return new Response(vtt, { headers: { 'content-type': 'text/vtt' } });
  };
  let s = setup({ page, tab: { url: 'https://example.com/film' }, fetchImpl });
  await s.attach();
  assert.deepEqual(fetched, [['https://example.com/en.vtt', 'include', 'manual']], "the track in the page's language (the tab's own origin: its cookies; no redirect followed by the browser)");
  const ctx = s.attached[0].ctx;
  assert.equal(ctx.body, 'About the film.\n\n## Transcript\n\n[00:00] The lamp room.\n[00:42] All well, light burning.');
  assert.equal(ctx.header, 'Transcript: English (2 cues), lines stamped [mm:ss]\n');
  assert.deepEqual(s.attached[0].videoSrc, { platform: 'html5', url: 'https://example.com/film', tabId: 7 });

  // a track on another origin: no cookies
  fetched.length = 0;
  s = setup({ page: { ...page, tracks: [{ ...page.tracks[1], src: 'https://cdn.example/en.vtt' }] }, tab: { url: 'https://example.com/film' }, fetchImpl });
  await s.attach();
  assert.deepEqual(fetched, [['https://cdn.example/en.vtt', 'omit', 'manual']]);

  // a track that cannot be read, or one the rules refuse: the page is attached without a transcript
  let fetchedPrivate = 0;
  const refusedTrack = { ...page, tracks: [{ ...page.tracks[1], src: 'http://camera.lan/en.vtt' }] };
  for (const [bad, pg] of [
    [async () => new Response('', { status: 404 }), page],
    [async () => new Response('not vtt'), page],
    [async () => { throw new Error('offline'); }, page],
    [async () => {
      fetchedPrivate++;
      return new Response(vtt);
    }, refusedTrack],
  ]) {
    s = setup({ page: pg, tab: { url: 'https://example.com/film' }, fetchImpl: bad });
    await s.attach();
    assert.deepEqual(s.attached[0].ctx, { url: 'https://example.com/film', title: 'Lamp', mode: 'full', body: 'About the film.' });
  }
  assert.equal(fetchedPrivate, 0, "a track on the reader's network is never fetched");
});

/** A site cache with the shape of site-cache.js, in memory. */
function memoryCache() {
  const m = new Map();
  return { m, get: async (tabId) => m.get(tabId)?.data ?? null, put: async (tabId, data, { url }) => void m.set(tabId, { data, url }) };
}

test("YouTube: the player's caption track read as WebVTT (people's track in the reader's language first), its details in the header, kept in the site cache", async () => {
  const vtt = 'WEBVTT\n\n00:00.000 --> 00:02.000\nHello harbour.\n\n00:42.000 --> 00:44.000\nAll well.\n';
  const player = {
    videoId: 'kpHarbour01',
    title: 'The harbour that learned to wait',
    author: 'Coastline',
    lengthSeconds: 3725,
    tracks: [
      { baseUrl: 'https://www.youtube.com/api/timedtext?v=kpHarbour01&lang=en&kind=asr', lang: 'en', label: 'English', asr: true },
      { baseUrl: 'https://www.youtube.com/api/timedtext?v=kpHarbour01&lang=de', lang: 'de', label: 'Deutsch', asr: false },
      { baseUrl: 'https://www.youtube.com/api/timedtext?v=kpHarbour01&lang=en-GB', lang: 'en-GB', label: 'English (UK)', asr: false },
      { baseUrl: 'https://evil.example/timedtext?lang=en', lang: 'en', label: 'English', asr: false },
    ],
  };
  const fetched = [];
  const fetchImpl = async (url) => {
    fetched.push(url);
    return new Response(vtt);
  };
  const cache = memoryCache();
  const url = 'https://www.youtube.com/watch?v=kpHarbour01';
  const page = { title: 'YouTube', text: 'Comments and more.', hasVideo: true, tracks: [] };
  let s = setup({ page, player, tab: { url }, fetchImpl, siteCache: cache });
  await s.attach();
  assert.deepEqual(fetched, ['https://www.youtube.com/api/timedtext?v=kpHarbour01&lang=en-GB&fmt=vtt'], "people's track in the reader's language, never a host that is not YouTube's");
  const ctx = s.attached[0].ctx;
  assert.equal(ctx.title, 'The harbour that learned to wait', "the video's title, not the tab's");
  assert.equal(ctx.header, 'Channel: Coastline\nLength: 1:02:05\nTranscript: English (UK) (2 cues), lines stamped [mm:ss]\n');
  assert.ok(ctx.body.endsWith('## Transcript\n\n[00:00] Hello harbour.\n[00:42] All well.'), ctx.body);
  assert.deepEqual(s.attached[0].videoSrc, { platform: 'youtube', url, tabId: 7 });
  assert.equal(cache.m.get(7).url, url);
  assert.equal(cache.m.get(7).data.page, url);

  // attached again on the same page (a #t= fragment is the same page): read from the cache
  s = setup({ page, player, tab: { url: `${url}#t=42` }, fetchImpl: async () => assert.fail('fetched again'), siteCache: cache });
  await s.attach();
  assert.equal(s.attached[0].ctx.header, ctx.header);
  assert.equal(s.attached[0].ctx.body, ctx.body);

  // only automatic captions: the automatic one, said so
  fetched.length = 0;
  s = setup({ page, player: { ...player, tracks: [player.tracks[0]] }, tab: { url: 'https://www.youtube.com/watch?v=other' }, fetchImpl, siteCache: memoryCache() });
  await s.attach();
  assert.deepEqual(fetched, ['https://www.youtube.com/api/timedtext?v=kpHarbour01&lang=en&kind=asr&fmt=vtt']);
  assert.match(s.attached[0].ctx.header, /^Transcript: English \(auto-generated\) \(2 cues\)/m);

  // no player (or it throws), no captions: the page is attached without a transcript, nothing cached
  for (const p of [null, new Error('Cannot access contents'), { ...player, tracks: [] }]) {
    const c = memoryCache();
    s = setup({ page, player: p, tab: { url }, fetchImpl: async () => assert.fail('nothing to fetch'), siteCache: c });
    await s.attach();
    assert.equal(s.attached[0].ctx.body, 'Comments and more.');
    assert.equal(c.m.size, 0);
  }
});

test('readYouTubePlayer: the player response for the video in the address bar, never a stale one', () => {
  const response = (videoId, tracks) => ({
    videoDetails: { videoId, title: `T ${videoId}`, author: 'A', lengthSeconds: '61' },
    captions: { playerCaptionsTracklistRenderer: { captionTracks: tracks } },
  });
  const run = ({ href, player, initial }) => {
    const saved = { location: globalThis.location, document: globalThis.document, yt: globalThis.ytInitialPlayerResponse };
    globalThis.location = { href };
    globalThis.document = { getElementById: (id) => (id === 'movie_player' && player ? { getPlayerResponse: () => player } : null) };
    globalThis.ytInitialPlayerResponse = initial;
    try {
      return readYouTubePlayer();
    } finally {
      globalThis.location = saved.location;
      globalThis.document = saved.document;
      globalThis.ytInitialPlayerResponse = saved.yt;
    }
  };
  const tracks = [
    { baseUrl: '/api/timedtext?v=b&lang=en', languageCode: 'en', name: { simpleText: 'English' }, kind: 'asr' },
    { baseUrl: 'https://www.youtube.com/api/timedtext?v=b&lang=fr', languageCode: 'fr', name: { runs: [{ text: 'Fran' }, { text: 'çais' }] } },
    { languageCode: 'xx' },
  ];
  // after in-page navigation the player has the new video; the served response is the old one
  const got = run({ href: 'https://www.youtube.com/watch?v=b', player: response('b', tracks), initial: response('a', []) });
  assert.deepEqual(got, {
    videoId: 'b',
    title: 'T b',
    author: 'A',
    lengthSeconds: 61,
    tracks: [
      { baseUrl: 'https://www.youtube.com/api/timedtext?v=b&lang=en', lang: 'en', label: 'English', asr: true },
      { baseUrl: 'https://www.youtube.com/api/timedtext?v=b&lang=fr', lang: 'fr', label: 'Français', asr: false },
    ],
  });
  // no player yet: the served response, when it is this video's
  assert.equal(run({ href: 'https://www.youtube.com/watch?v=a', player: null, initial: response('a', []) }).videoId, 'a');
  // neither describes this video: nothing
  assert.equal(run({ href: 'https://www.youtube.com/watch?v=c', player: response('b', tracks), initial: response('a', []) }), null);
  assert.equal(run({ href: 'https://www.youtube.com/watch?v=c', player: null, initial: undefined }), null);
});

test('a PDF: a tab is read by the PDF reader when the page says it is a PDF, never because its address ends in .pdf', async () => {
  const asked = [];
  const pdfReader = {
    read: async (url, o) => {
      asked.push([url, o]);
      return { url: `${url}#final`, numPages: 1, pagesRead: 1, info: { title: 'Paper' }, text: '[Page 1]\nHello.', figures: [], figuresFound: 0 };
    },
  };
  const hostLimits = async () => ({ turnMaxImages: 5, turnImageBudget: 1000 });
  let s = setup({ page: { title: '', text: '', contentType: 'application/pdf' }, tab: { url: 'https://a.example/p.pdf', title: 'p.pdf' }, pdfReader, hostLimits });
  const out = await s.attach();
  assert.deepEqual(asked, [['https://a.example/p.pdf', { maxFigures: 5, tabUrl: 'https://a.example/p.pdf' }]]);
  // the stored URL is the address the reader says the bytes came from
  assert.deepEqual(s.attached[0], { ctx: { url: 'https://a.example/p.pdf#final', title: 'Paper', mode: 'pdf', header: 'Pages: 1\n', body: '[Page 1]\nHello.' }, paper: true });
  assert.deepEqual(s.tracked, [{ mode: 'pdf', url: 'https://a.example/p.pdf#final', text: '[Page 1]\nHello.' }]);
  assert.equal(out.title, 'Paper');

  s = setup({ page: { title: '', text: '', contentType: 'application/pdf' }, tab: { url: 'https://a.example/download?id=7', title: 'Report' }, pdfReader });
  await s.attach();
  assert.equal(asked[1][0], 'https://a.example/download?id=7');
  assert.equal(s.attached[0].ctx.mode, 'pdf');

  // an HTML page at an address ending in .pdf is the page it is: nothing is fetched again
  s = setup({ page: { title: 'Article', text: 'The article.', contentType: 'text/html' }, tab: { url: 'https://evil.example/article.pdf', title: 'article.pdf' }, pdfReader });
  await s.attach();
  assert.equal(asked.length, 2, 'the PDF reader is not asked');
  assert.deepEqual(s.attached[0].ctx, { url: 'https://evil.example/article.pdf', title: 'Article', mode: 'full', body: 'The article.' });
});

test('Attach this PDF: the page the link is on is the tab (cookies to its origin only), the stored URL the address the bytes came from', async () => {
  const asked = [];
  const pdfReader = {
    read: async (url, o) => {
      asked.push([url, o]);
      return { url: 'https://papers.example/files/p.pdf', numPages: 1, pagesRead: 1, info: {}, text: 'x', figures: [], figuresFound: 0 };
    },
  };
  const s = setup({ page: 'no injection', pdfReader });
  const attachPage = createPageAttach({ storage: { attach: { trackChange: async () => ({ changed: true }) }, history: { attach: async (a) => (s.attached.push(a), { attachId: 'a', index: 0, length: 1 }) } }, chrome: {}, readSettings: async () => ({}), summarize: async () => false, pdfReader });
  const r = await attachPage.pdfLink({ url: 'https://papers.example/p.pdf', tabUrl: 'https://blog.example/post' });
  assert.deepEqual(asked, [['https://papers.example/p.pdf', { maxFigures: undefined, tabUrl: 'https://blog.example/post' }]]);
  assert.equal(r.url, 'https://papers.example/files/p.pdf');
  assert.equal(s.attached[0].ctx.url, 'https://papers.example/files/p.pdf');
});

function imageResponse(type, bytes) {
  return new Response(new Uint8Array(bytes), { headers: { 'content-type': type } });
}

test("an article's figures: fetched in order, numbered where they stood, captions in the Figures section; failures keep their caption as text", async () => {
  const page = {
    text: 'Intro.\n\n\u00010\u0001\n\nMiddle.\n\n\u00011\u0001\n\nMore.\n\n\u00012\u0001\n\nEnd.',
    figures: [
      { src: 'https://a.example/lamp.png', caption: 'The lamp room' },
      { src: 'https://a.example/broken.png', caption: 'A broken one' },
      { src: 'https://a.example/tide.jpg', caption: '' },
    ],
  };
  const fetched = [];
  const fetchImpl = async (url, o) => {
    fetched.push([url, o.credentials]);
    if (url.includes('broken')) return new Response('', { status: 500 });
    return imageResponse(url.endsWith('.png') ? 'image/png' : 'image/jpeg; charset=binary', [1, 2, 3]);
  };
  const out = await placeFigures(page, { fetchImpl, limits: { turnMaxImages: 8, turnImageBudget: 1000 } });
  assert.deepEqual(fetched.map((f) => f[1]), ['omit', 'omit', 'omit']);
  assert.equal(out.text, 'Intro.\n\n[Figure 1] The lamp room\n\nMiddle.\n\n(Picture not attached: A broken one)\n\nMore.\n\n[Figure 2]\n\nEnd.');
  assert.deepEqual(out.images, ['data:image/png;base64,AQID', 'data:image/jpeg;base64,AQID']);
  assert.equal(out.section, '## Figures\nThe pictures attached with this text, in order:\n1. The lamp room\n2. Figure on page ?');

  // the per-turn count: only the first one fetched and attached
  fetched.length = 0;
  const one = await placeFigures(page, { fetchImpl, limits: { turnMaxImages: 1, turnImageBudget: 1000 } });
  assert.deepEqual(fetched.map((f) => f[0]), ['https://a.example/lamp.png']);
  assert.equal(one.images.length, 1);
  assert.match(one.text, /\(Picture not attached: A broken one\)[\s\S]*More\.\n\n\n\nEnd\.$/);
  // not a picture (SVG, HTML): not attached
  const svg = await placeFigures({ text: '\u00010\u0001', figures: [{ src: 'https://a.example/x.svg', caption: 'Logo' }] }, { fetchImpl: async () => imageResponse('image/svg+xml', [1]) });
  assert.deepEqual(svg, { text: '(Picture not attached: Logo)', images: [], section: '' });
});

test("a figure the rules refuse is never fetched and keeps its caption; one on the tab's own origin goes with its cookies", async () => {
  const page = {
    text: '\u00010\u0001\n\n\u00011\u0001\n\n\u00012\u0001',
    figures: [
      { src: 'http://camera.lan/snapshot.png', caption: 'The camera' },
      { src: 'https://news.example/lamp.png', caption: 'Lamp' },
      { src: 'https://cdn.example/tide.png', caption: 'Tide' },
    ],
  };
  const fetched = [];
  const fetchImpl = async (url, o) => {
    fetched.push([url, o.credentials, o.redirect]);
    return imageResponse('image/png', [1, 2, 3]);
  };
  const out = await placeFigures(page, { fetchImpl, tabUrl: 'https://news.example/story', limits: { turnMaxImages: 8, turnImageBudget: 1000 } });
  assert.deepEqual(fetched, [
    ['https://news.example/lamp.png', 'include', 'manual'],
    ['https://cdn.example/tide.png', 'omit', 'manual'],
  ]);
  assert.equal(out.text, '(Picture not attached: The camera)\n\n[Figure 1] Lamp\n\n[Figure 2] Tide');
  assert.equal(out.images.length, 2);
  // a tab on the reader's own network may attach the pictures there
  fetched.length = 0;
  const local = await placeFigures(page, { fetchImpl, tabUrl: 'http://192.168.1.2/wiki', limits: { turnMaxImages: 8, turnImageBudget: 1000 } });
  assert.equal(local.images.length, 3);
  assert.equal(fetched[0][0], 'http://camera.lan/snapshot.png');
});

test('an attached article with figures: the pictures go with it, anchored, the Figures section last', async () => {
  const page = { title: 'A', text: 'Intro.\n\n\u00010\u0001\n\nEnd.', method: 'readability', figures: [{ src: 'https://a.example/lamp.png', caption: 'Lamp' }] };
  const s = setup({ page, tab: { url: 'https://a.example/a' }, fetchImpl: async () => imageResponse('image/png', [1, 2, 3]), hostLimits: async () => ({ turnMaxImages: 8, turnImageBudget: 1000 }) });
  const out = await s.attach();
  assert.equal(s.attached[0].ctx.body, 'Intro.\n\n[Figure 1] Lamp\n\nEnd.\n\n## Figures\nThe pictures attached with this text, in order:\n1. Lamp');
  assert.deepEqual(s.attached[0].images, ['data:image/png;base64,AQID']);
  assert.equal(s.attached[0].placement, undefined, 'anchors: each picture after its line');
  assert.equal(out.figures, 1);
});

test('the same page attached twice before sending: no second entry, the first named; changed, or after a message, attached again', async () => {
  const live = [{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi' }];
  const opts = { live, page: { title: 'Harbour notes', url: 'https://x/', text: 'The keeper wrote.', hasVideo: false }, tab: { url: 'https://example.com/harbour', title: 'Harbour' } };
  const s = setup(opts);
  const first = await s.attach();
  assert.equal(first.duplicate, undefined);
  assert.equal(live.length, 3);
  const second = setup(opts);
  const again = await second.attach();
  assert.equal(again.duplicate, true, 'the tracker says unchanged and it is still waiting to be sent');
  assert.equal(again.index, 2);
  assert.equal(again.attachId, 'att-1');
  assert.equal(again.title, 'Harbour notes');
  assert.deepEqual(second.attached, [], 'nothing more was stored');
  assert.equal(live.length, 3);

  // the page changed since: attached again, with the change note
  const changed = setup({ ...opts, change: { changed: true, previousAttachedAt: Date.now() - 60_000, previousLength: 3 } });
  assert.equal((await changed.attach()).duplicate, undefined);
  assert.equal(live.length, 4);

  // once a message went after it, the same page is new context for the next turn
  live.push({ role: 'user', content: 'and then?' }, { role: 'assistant', content: 'then…' });
  const later = setup(opts);
  assert.equal((await later.attach()).duplicate, undefined);
  assert.equal(live.length, 7);
});
