// What an attached page sends to the model, the old way (the innerText of article/main/body) and
// the new (Mozilla's Readability, laid out as Markdown-like text): for the five real-world-shaped
// pages in tests/e2e/pages/ (pages.json names each page's boilerplate and article strings), the
// characters sent, the boilerplate characters each way and the share of boilerplate removed; then
// how long the extraction takes on a 2 MB article. Both ways run the extension's own function
// (background/page-attach.js `extractReadablePage`) in Debian's headless Chromium: the old way is
// that function without Readability injected (its DOM fallback is the old reader, unchanged).
// Last, a 100-page PDF with 10 figures (tests/e2e/pdf-fixture.mjs) read the way an attach reads it:
// the real extension's worker opens its offscreen document, PDF.js reads every page and renders the
// figures, the document closes (background/pdf-attach.js `read`); the first round is a warm-up.
//
//   node bench/reading.mjs          (or BENCH_ONLY=read ./bench.sh) prints two Markdown tables

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { CHROMIUM, ROOT, launch } from '../tests/e2e/harness.mjs';
import { makePdf } from '../tests/e2e/pdf-fixture.mjs';

// playwright-core is installed for the end-to-end tests (tests/e2e/package.json)
const { chromium } = await import('../tests/e2e/node_modules/playwright-core/index.mjs');
import { extractReadablePage } from '../extension/background/page-attach.js';

const PAGES = path.join(ROOT, 'tests', 'e2e', 'pages');
const READABILITY = fs.readFileSync(path.join(ROOT, 'extension', 'vendor', 'readability', 'Readability.js'), 'utf8');
const ROUNDS = Number(process.env.READING_ROUNDS || 7);

/** A 2 MB news-shaped article: 2,000 paragraphs, headings, lists and the usual page furniture. */
function bigArticle() {
  const para = (i) => `<p>Paragraph ${i}: the tide tables for the harbour were kept by hand until ${1900 + (i % 120)}, and every keeper added notes about wind, fog, and the boats that came in late. ${'Observations continued through the season. '.repeat(20)}</p>`;
  const parts = [];
  for (let i = 0; i < 2000; i++) {
    if (i % 100 === 0) parts.push(`<h2>Part ${i / 100 + 1}</h2><ul><li>first point ${i}</li><li>second point ${i}</li></ul>`);
    parts.push(para(i));
  }
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>A very long article</title></head><body>
<header><nav><a href="/">Home</a> <a href="/world">World</a></nav></header>
<div class="cookie">We use cookies. Accept all cookies</div>
<main><article><h1>A very long article</h1>${parts.join('\n')}</article></main>
<aside><h3>Most read</h3><ol><li>One</li><li>Two</li></ol></aside><footer>© 2026 Example</footer></body></html>`;
}

function serve(routes) {
  const server = http.createServer((req, res) => {
    const body = routes[new URL(req.url, 'http://x').pathname];
    if (body === undefined) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(body);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, origin: `http://127.0.0.1:${server.address().port}` })));
}

/** Run the extension's reader in `page`, with or without Readability; `{result, ms}`. */
async function read(page, withReadability) {
  if (withReadability) await page.addScriptTag({ content: READABILITY });
  return page.evaluate(async (src) => {
    const fn = (0, eval)(`(${src})`);
    const t0 = performance.now();
    const result = fn();
    return { result, ms: performance.now() - t0 };
  }, extractReadablePage.toString());
}

const count = (text, strings) => strings.reduce((n, s) => n + (text.includes(s) ? s.length : 0), 0);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const pages = JSON.parse(fs.readFileSync(path.join(PAGES, 'pages.json'), 'utf8'));
  const routes = Object.fromEntries(pages.map((p) => [`/${p.file}`, fs.readFileSync(path.join(PAGES, p.file), 'utf8')]));
  routes['/big.html'] = bigArticle();
  const { server, origin } = await serve(routes);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless=new', '--no-sandbox'] });
  try {
    const rows = [];
    for (const p of pages) {
      const out = {};
      for (const way of ['old', 'new']) {
        const tab = await browser.newPage();
        await tab.goto(`${origin}/${p.file}`);
        const { result } = await read(tab, way === 'new');
        await tab.close();
        out[way] = result;
      }
      const bOld = count(out.old.text, p.boilerplate);
      const bNew = count(out.new.text, p.boilerplate);
      const missing = p.article.filter((s) => !out.new.text.includes(s));
      rows.push(
        `| ${p.file} | ${out.old.text.length} | ${out.new.text.length} (${out.new.method}) | ${bOld} | ${bNew} | ${bOld ? `${Math.round((100 * (bOld - bNew)) / bOld)} %` : '–'} | ${missing.length ? `missing: ${missing.join('; ')}` : 'all kept'} |`,
      );
    }
    console.log('| Page | Chars sent, old (innerText) | Chars sent, new | Boilerplate chars, old | new | Boilerplate removed | Article strings |');
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows) console.log(r);

    const times = { old: [], new: [] };
    let size = 0;
    for (let i = 0; i < ROUNDS; i++) {
      for (const way of i % 2 ? ['new', 'old'] : ['old', 'new']) {
        const tab = await browser.newPage();
        await tab.goto(`${origin}/big.html`);
        const { result, ms } = await read(tab, way === 'new');
        size = routes['/big.html'].length;
        if (i > 0) times[way].push(ms);
        if (i === 0 && way === 'new' && result.method !== 'readability') throw new Error('Readability found no article in the 2 MB page');
        await tab.close();
      }
    }
    console.log('');
    console.log(`| Extraction in the page, ${(size / 1e6).toFixed(2)} MB article (median of ${ROUNDS - 1}, min–max) | ms |`);
    console.log('|---|---|');
    for (const way of ['old', 'new']) {
      const t = times[way];
      console.log(`| ${way === 'old' ? 'old: innerText of article/main/body' : 'new: Readability + Markdown layout'} | ${median(t).toFixed(1)} (${Math.min(...t).toFixed(1)}–${Math.max(...t).toFixed(1)}) |`);
    }
  } finally {
    await browser.close();
    server.close();
  }
  await pdfTiming();
}

/** The 100-page PDF through the extension's own reader: median ms and what it found. */
async function pdfTiming() {
  const figures = Array.from({ length: 10 }, (_, i) => ({ page: 5 + i * 10, width: 400, height: 260 }));
  const pdf = makePdf({ pages: 100, figures, linesPerPage: 30 });
  const server = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'application/pdf', 'content-length': pdf.length }).end(pdf));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/paper.pdf`;
  const k = await launch({ name: 'bench-pdf' });
  try {
    const times = [];
    let last = null;
    for (let i = 0; i < ROUNDS; i++) {
      last = await k.worker.evaluate(async (u) => {
        const t0 = performance.now();
        const r = await self.__keepsake.pdfReader.read(u, { maxFigures: 8 });
        return { ms: performance.now() - t0, pages: r.pagesRead, chars: r.text.length, figures: r.figures.length, found: r.figuresFound };
      }, url);
      if (i > 0) times.push(last.ms);
    }
    console.log('');
    console.log(`| Reading a PDF (median of ${ROUNDS - 1}, min–max) | Size | Pages | Chars | Figures rendered (found) | ms |`);
    console.log('|---|---|---|---|---|---|');
    console.log(`| offscreen document + PDF.js, text of every page, figures cut out as JPEG | ${(pdf.length / 1e6).toFixed(2)} MB | ${last.pages} | ${last.chars} | ${last.figures} (${last.found}) | ${median(times).toFixed(0)} (${Math.min(...times).toFixed(0)}–${Math.max(...times).toFixed(0)}) |`);
  } finally {
    await k.close();
    server.close();
  }
}

await main();
