// node --test extension/lib/redos.test.js
//
// Issue 18: no function that runs on text a model, a page or an imported file can shape does
// super-linear work. Each case of test-support/redos.js is timed (CPU) on adversarial inputs of
// 50 KB and 200 KB in a child process: the 200 KB time must stay within LIMIT × the 50 KB time
// (linear work gives about 4, quadratic 16, a catastrophic regex far more, or no answer at all, which
// the per-shape timeout turns into a failure). Figures: `node --expose-gc
// extension/test-support/redos.js --report`.
//
// The second part keeps the sweep complete: every regular expression in the extension's code is
// listed below with the case that exercises it, or why no page or model text reaches it. A new or
// changed regex fails that test until it is added here.

import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { CASES, CHILD_ARGS, FAST_MS, LARGE, SMALL, regexLiterals } from '../test-support/redos.js';

const EXT = join(dirname(fileURLToPath(import.meta.url)), '..');
/** 200 KB may take at most this many times the 50 KB time (4 is linear, 16 quadratic). */
const LIMIT = 10;
/** A shape that gives no result within this long fails (a runaway regex). */
const SHAPE_TIMEOUT_MS = 30_000;

/** Run one case in a child process: {results: [...], stuck: shape | null, error}. */
function runCase(name) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...CHILD_ARGS, name], { stdio: ['ignore', 'pipe', 'pipe'] });
    const results = [];
    let current = null;
    let stuck = null;
    let error = '';
    let buf = '';
    let timer = null;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        stuck = current ?? '(start)';
        child.kill('SIGKILL');
      }, SHAPE_TIMEOUT_MS);
    };
    arm();
    child.stderr.on('data', (d) => (error += d));
    child.stdout.on('data', (d) => {
      buf += d;
      for (let i = buf.indexOf('\n'); i !== -1; i = buf.indexOf('\n')) {
        const m = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (m.type === 'start') {
          current = m.shape;
          arm();
        } else if (m.type === 'result') results.push(m);
        else if (m.type === 'error') error += m.message;
      }
    });
    child.on('exit', () => {
      clearTimeout(timer);
      resolve({ results, stuck, error });
    });
  });
}

const fmt = (x) => (x < 10 ? x.toFixed(2) : x.toFixed(0));

test(`near-linear work on adversarial inputs (${SMALL / 1000} KB → ${LARGE / 1000} KB, markdown 25 → 100 KB; CPU time)`, { concurrency: 2 }, async (t) => {
  await Promise.all(
    CASES.map((c) =>
      t.test(c.name, async (tt) => {
        const { results, stuck, error } = await runCase(c.name);
        assert.equal(stuck, null, `${c.name} (${c.where}): no answer on shape "${stuck}" within ${SHAPE_TIMEOUT_MS / 1000} s`);
        assert.equal(error, '', `${c.name}: the measuring process failed: ${error}`);
        assert.equal(results.length, c.shapes.length, `${c.name}: every shape measured`);
        const bad = [];
        for (const r of results) {
          if (r.ratios.length === 0) continue; // 200 KB in under FAST_MS
          const ratio = r.ratios[r.ratios.length - 1];
          if (ratio > LIMIT) {
            bad.push(`${r.shape}: ${fmt(r.ms[0])} ms at ${r.lengths[0]} chars → ${fmt(r.ms[1])} ms at ${r.lengths[1]} (×${r.ratios.map((x) => x.toFixed(1)).join(', ×')})`);
          }
        }
        const slowest = results.reduce((a, b) => (b.ms[1] > a.ms[1] ? b : a));
        tt.diagnostic(
          `slowest: ${slowest.shape}, ${fmt(slowest.ms[1])} ms CPU for ${Math.round(slowest.lengths[1] / 1000)} KB` +
            (slowest.ratios.length ? ` (×${slowest.ratios[slowest.ratios.length - 1].toFixed(1)} of ${Math.round(slowest.lengths[0] / 1000)} KB)` : ` (under ${FAST_MS} ms)`),
        );
        assert.deepEqual(bad, [], `${c.name} (${c.where}) grows faster than linear (limit ×${LIMIT}):\n${bad.join('\n')}`);
      }),
    ),
  );
});

// ---------------------------------------------------------------------------------------------
// Every regex of the extension: covered by a case above, or not reachable by page or model text.

const CASE = (name) => ({ case: name });
const SAFE = (why) => ({ safe: why });

const AUDIT = {
  'background/site-cache.js': {
    '/^\\d+$/': CASE('site-cache.tabIdOfKey'),
  },
  'background/image-cache.js': {
    '/^[A-Za-z0-9+/]*={0,2}$/': SAFE('base64 of image bytes the host returned; one anchored character class, linear'),
  },
  'background/image-tokens.js': {
    '/^data:([^;,]+)((?:;[^;,]*)*?);base64,(.*)$/is': CASE('image-tokens.parseDataUrl'),
    '/^image\\//i': CASE('image-tokens.parseDataUrl'),
    '/^(?:keepsake-image:sha256:[0-9a-f]{64}|keepsake-turn-image:\\d+)$/': CASE('image-tokens.collectTokens'),
    '/"type"\\s*:\\s*"(?:image_url|input_image|image)"/': CASE('image-tokens.textHasImages'),
  },
  'background/page-attach.js': {
    '/\\r\\n?/g': CASE('page-attach.extractReadablePage'),
    '/[^\\S\\n]+/g': CASE('page-attach.extractReadablePage'),
    '/ ?\\n ?/g': CASE('page-attach.extractReadablePage'),
    '/\\n{3,}/g': CASE('page-attach.extractReadablePage'),
    '/^https?:\\/\\//i': SAFE('anchored literal on a link URL'),
  },
  'background/pdf-attach.js': {
    '/\\s+/g': SAFE('one character class with +, linear (PDF metadata strings)'),
  },
  'background/selection.js': {
    '/\\r\\n?/g': SAFE('a literal with one optional character, linear (the selected text)'),
  },
  'offscreen/pdf.js': {
    '/[^\\S\\n]+/g': SAFE('one character class with +, linear (a PDF page\'s text)'),
    '/\\n{3,}/g': SAFE('one character with a lower bound, linear'),
    '/^D:(\\d{4})(\\d{2})?(\\d{2})?/': SAFE('anchored, at most 8 digits read (a PDF date)'),
  },
  'lib/caps.js': {
    '/^(?:https?:\\/\\/|data:image\\/)/i': CASE('caps.imageShapeOk'),
  },
  'lib/entries.js': {
    '/ \\(fallback to full\\)$/': CASE('entries.describeAttach'),
    '/^keepsake-image:sha256:[0-9a-f]{64}$/': CASE('entries.isImageRef'),
    '/^([a-z][a-z0-9+.-]*:\\/\\/)[^/?#@]*@/i': CASE('entries.redactUrl'),
  },
  'lib/agents.js': {
    '/[;,]/': SAFE('one character class, no repetition'),
  },
  'lib/i18n.js': {
    '/_/g': SAFE('a literal character'),
    '/\\$([1-9])/g': SAFE('a literal and one character class, no repetition'),
  },
  'lib/llm.js': {
    '/^\\d{1,3}$/': CASE('providers.insecureBaseUrlWarning'),
  },
  'lib/links.js': {
    '/[\\u0000-\\u001f\\u007f-\\u009f]/': CASE('links.safeHref'),
  },
  'lib/markdown.js': {
    '/^\\s$/u': CASE('markdown.parseInline'),
    '/^[\\p{P}\\p{S}]$/u': CASE('markdown.parseInline'),
    '/^[\\p{Script=Han}\\p{Script=Hiragana}\\p{Script=Katakana}\\p{Script=Hangul}\\u3000-\\u303f\\uff00-\\uffef]$/u': CASE('markdown.parseInline'),
    '/&(?:#[xX]([0-9a-fA-F]{1,6})|#([0-9]{1,7})|([A-Za-z][A-Za-z0-9]{1,31}));/y': CASE('markdown.parseInline'),
    '/^:?-+:?$/': CASE('markdown.renderMarkdown'),
    '/[ \\t]/': CASE('markdown.renderMarkdown'),
    '/[^A-Za-z0-9_+#.-]/g': CASE('markdown.renderMarkdown'),
    '/<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\\s<>]*)>/y': CASE('markdown.parseInline'),
    "/<([A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*)>/y": CASE('markdown.parseInline'),
    '/\\n/g': CASE('markdown.parseInline'),
    '/^ *$/': CASE('markdown.parseInline'),
    '/[A-Za-z0-9]/': CASE('markdown.linkify'),
    '/\\r\\n|\\r|\\n/': CASE('markdown.renderMarkdown'),
  },
  'lib/native-port.js': {
    '/disconnected port/i': SAFE("the browser's own error text (runtime.lastError), a literal"),
  },
  'lib/pills.js': {
    '/^[0-9]+$/': CASE('pills.parseTimestamp'),
  },
  'lib/protocol.js': {
    '/native messaging host not found/i': SAFE("the browser's own error text, a literal"),
    '/no such native application/i': SAFE("Firefox's own error text, a literal"),
    '/native messaging host .* is not registered/i': SAFE("the browser's own error text (one `.*` between literals: linear per occurrence)"),
    '/access to the specified native messaging host is forbidden/i': SAFE("the browser's own error text, a literal"),
    '/native host has exited/i': SAFE("the browser's own error text, a literal"),
    '/failed to start native messaging host/i': SAFE("the browser's own error text, a literal"),
    '/error when communicating with the native messaging host/i': SAFE("the browser's own error text, a literal"),
    '/exceeded maximum allowed size/i': SAFE("the browser's own error text, a literal"),
  },
  'lib/ui/format.js': {
    '/\\B(?=(\\d{3})+(?!\\d))/g': SAFE('the digits of one number (at most 16); quadratic in that length only'),
  },
  'options/options.js': {
    '/api\\.openai\\.com/': SAFE('a literal on the typed base URL, linear'),
    '/^OK:?\\s*/': SAFE('the ping detail made by llm.ping; anchored, linear'),
  },
  'options/providers.js': {
    '/[,_\\s]/g': CASE('providers.parseWholeNumber'),
    '/^\\d+$/': CASE('providers.parseWholeNumber'),
  },
  'sidepanel/composer.js': {
    '/^image\\//i': SAFE("a file's MIME type from the browser; anchored literal"),
  },
  'sidepanel/draft.js': {
    '/^\\s+/': CASE('draft.draftAfterSend'),
  },
  'sidepanel/export-name.js': {
    '/[^A-Za-z0-9\\u4E00-\\u9FFF]+/gu': CASE('export-name.slugify'),
    '/^-+|-+$/g': CASE('export-name.slugify'),
    '/-+$/g': SAFE('runs on at most 40 characters (after slice(0, 40))'),
    '/[\\\\/:*?"<>|\\u0000-\\u001f]+/g': CASE('export-name.safeFilename'),
    '/^[.\\s-]$/': CASE('export-name.safeFilename'),
  },
  'sidepanel/images.js': {
    '/^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/is': CASE('images.splitDataUrl'),
    '/^https?:\\/\\//i': SAFE('anchored literal'),
  },
  'sidepanel/pixels.js': {
    '/^data:image\\//i': SAFE('anchored literal'),
  },
  'sidepanel/snippet.js': {
    '/\\s+/gu': CASE('snippet.normalizeQuery'),
  },
};

function sources() {
  const out = [];
  const walk = (dir) => {
    for (const f of readdirSync(dir).sort()) {
      const p = join(dir, f);
      if (statSync(p).isDirectory()) {
        // vendor/: third-party code pinned and copied as published (vendor/copy.mjs): Mozilla's
        // Readability is Firefox's Reader View; it is not ours to rewrite, so not audited here
        if (f !== 'test-support' && f !== 'fixtures' && f !== 'node_modules' && f !== 'vendor') walk(p);
      } else if (p.endsWith('.js') && !p.endsWith('.test.js')) out.push(p);
    }
  };
  walk(EXT);
  return out;
}

test('every regex of the extension is audited for page and model text (regexLiterals finds them)', () => {
  const found = {};
  for (const p of sources()) {
    const rel = relative(EXT, p).split('\\').join('/');
    for (const { line, literal } of regexLiterals(readFileSync(p, 'utf8'))) {
      assert.notEqual(literal, 'RegExp', `${rel}:${line}: a regex built at run time (new RegExp) cannot be audited here; use a literal`);
      (found[rel] ??= {})[literal] = line;
    }
  }
  const missing = [];
  for (const [file, lits] of Object.entries(found)) {
    for (const [lit, line] of Object.entries(lits)) if (!AUDIT[file]?.[lit]) missing.push(`${file}:${line} ${lit}`);
  }
  assert.deepEqual(missing, [], 'regexes with no entry in AUDIT (add the case that exercises the function, or why no page/model text reaches it)');
  const stale = [];
  const names = new Set(CASES.map((c) => c.name));
  for (const [file, lits] of Object.entries(AUDIT)) {
    for (const [lit, how] of Object.entries(lits)) {
      if (!found[file] || !(lit in found[file])) stale.push(`${file} ${lit}`);
      if (how.case && !names.has(how.case)) stale.push(`${file} ${lit}: no case ${how.case}`);
    }
  }
  assert.deepEqual(stale, [], 'AUDIT entries that match no regex (or name no case)');
});

test('regexLiterals tells a regex from a division and skips strings, comments and templates', () => {
  const src = [
    'const a = b / c / d; // not /a regex/',
    "const s = '/not/' + \"/either/\" + `/${x / 2}/ ${'/'}`;",
    'const r = /x\\/[/]y/gi; /* /nope/ */',
    'if (ok) return /^a+$/.test(v);',
    'const m = f(/[a-z]/u, (p) => p / 2);',
    'x = new RegExp(y);',
  ].join('\n');
  assert.deepEqual(regexLiterals(src), [
    { line: 3, literal: '/x\\/[/]y/gi' },
    { line: 4, literal: '/^a+$/' },
    { line: 5, literal: '/[a-z]/u' },
    { line: 6, literal: 'RegExp' },
  ]);
});
