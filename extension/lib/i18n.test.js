// The catalogue is whole and the UI takes its words from it:
//   - every locale has exactly the keys of `en`, with the same $1…$9 substitutions;
//   - a translated message is not the English one copied (brand names and commands excepted);
//   - every `t('key')` in the code names a key of `en`;
//   - no user-visible English is hard-coded: no string literal with words in the extension's code
//     (outside tests, vendored code and lines marked `// i18n-ok: <why>`), no text or
//     title/placeholder/aria-label/alt in the HTML pages without its data-i18n attribute;
//   - dates and numbers follow the UI language.
// Run alone: node --test extension/lib/i18n.test.js (failures list file:line and the literal).

import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { LOCALES, localeFor, t, useLocale, formatNumber, formatDateTime, uiLocale } from './i18n.js';

const EXT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (rel) => fs.readFileSync(path.join(EXT, rel), 'utf8');
const catalogue = (loc) => JSON.parse(read(`_locales/${loc}/messages.json`));

/** Every file under extension/ with one of the extensions, tests and vendored code left out. */
export function sourceFiles(exts) {
  const out = [];
  const walk = (dir) => {
    for (const f of fs.readdirSync(path.join(EXT, dir))) {
      const rel = path.join(dir, f);
      if (['vendor', 'node_modules', 'test-support', 'fixtures', '_locales'].includes(f)) continue;
      if (fs.statSync(path.join(EXT, rel)).isDirectory()) walk(rel);
      else if (exts.some((e) => f.endsWith(e)) && !f.endsWith('.test.js')) out.push(rel);
    }
  };
  walk('.');
  return out.sort();
}

const subsOf = (m) => [...new Set(m.match(/\$[1-9]/g) || [])].sort().join(',');

test('every locale has the keys of en, with the same substitutions', () => {
  const en = catalogue('en');
  assert.ok(Object.keys(en).length > 0);
  for (const loc of LOCALES) {
    const c = catalogue(loc);
    const missing = Object.keys(en).filter((k) => !(k in c));
    const extra = Object.keys(c).filter((k) => !(k in en));
    assert.deepEqual(missing, [], `${loc} lacks keys`);
    assert.deepEqual(extra, [], `${loc} has keys en does not`);
    for (const [k, v] of Object.entries(c)) {
      assert.equal(typeof v.message, 'string', `${loc}.${k}.message`);
      assert.equal(subsOf(v.message), subsOf(en[k].message), `${loc}.${k}: substitutions differ from en`);
    }
  }
});

// A message may equal the English one when it holds no English prose: names, commands, units.
const SAME_OK = /^[^a-z]*$|^(en|zh_CN|pt_BR)$|^(Keepsake|JSON|MD|Markdown|SQLite|OK|API|URL|Ping|Ollama|OpenAI|Anthropic|PDF)$/;

test('translations are not English copied', () => {
  const en = catalogue('en');
  for (const loc of LOCALES.filter((l) => l !== 'en')) {
    const c = catalogue(loc);
    const copied = Object.keys(en).filter((k) => {
      const m = en[k].message;
      if (c[k].message !== m) return false;
      const prose = m.replace(/`[^`]*`|\$[1-9]|https?:\S+|keepsake-host[^.]*|\.\/\S+/g, '');
      return !SAME_OK.test(m) && /[A-Za-z]{3,}\s+[A-Za-z]{2,}/.test(prose);
    });
    assert.deepEqual(copied, [], `${loc} copies English for these keys`);
  }
});

test('every t() key in the code is in the catalogue', () => {
  const en = catalogue('en');
  const unknown = [];
  const dynamic = [];
  for (const f of sourceFiles(['.js'])) {
    if (f === path.join('lib', 'i18n.js')) continue;
    const lines = read(f).split('\n');
    lines.forEach((line, i) => {
      if (/^\s*(\/\/|\*|\/\*)/.test(line)) return;
      // t('key', …) and tNodes('key', …) (lib/ui/dom.js: the same message with nodes in its places)
      for (const m of line.matchAll(/\b(?:t|tNodes)\(\s*(['"`])([^'"`]*)\1/g)) if (!(m[2] in en)) unknown.push(`${f}:${i + 1} ${m[2]}`);
      for (const m of line.matchAll(/(?<!function )\b(t|tNodes)\(\s*([^'"`\s)])/g)) if (!/i18n-ok/.test(line)) dynamic.push(`${f}:${i + 1} ${m[1]}(${m[2]}…`);
    });
  }
  assert.deepEqual(unknown, [], 'keys not in _locales/en/messages.json');
  assert.deepEqual(dynamic, [], 't() keys must be literals (or the line marked // i18n-ok: with the keys it can take)');
});

// ------------------------------------------------------------------------------------------- hard-coded words

/**
 * String literals on a line that read as words for people: two words or more, or one capitalised
 * word where a label goes. Technical strings (selectors, ids, operation names, CSS, URLs) do not.
 */
export function proseLiterals(line) {
  const out = [];
  const re = /'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|`((?:[^`\\]|\\.)*)`/g;
  for (const m of line.matchAll(re)) {
    const s = m[1] ?? m[2] ?? m[3];
    const before = line.slice(0, m.index);
    // class names, selectors, element names
    if (/(\bclass|\brel|className|classList\.\w+\(|querySelector(All)?\(|closest\(|matches\(|createElement(NS)?\()\s*[:=(]?\s*$/.test(before)) continue;
    const stat = s.replace(/\$\{[^}]*\}/g, ' ').replace(/\\n/g, ' ').trim();
    if (/^(https?:|[a-z-]+:\/\/)/.test(stat)) continue;
    const tokens = stat.split(/\s+/);
    const words = tokens.filter((w) => /^[(\u201c"]?[A-Za-z][a-z\u2019']+[)\u201d",.;:!?\u2026]*$/.test(w));
    // one capitalised word is a label ('Rename', 'Delete', `Load “${name}”`), except where code compares
    // it with a key name or a header
    const capital = words.some((w) => /^[(\u201c"]?[A-Z][a-z]/.test(w));
    const compared = /(===?|!==?|case|key|\.code)\s*\(?\s*$/.test(before);
    const label = capital && !compared && (tokens.length === 1 || m[3] !== undefined);
    if (words.length >= 2 || label) out.push(s);
  }
  return out;
}

test('no user-visible English is hard-coded in the extension code', () => {
  const found = [];
  for (const f of sourceFiles(['.js'])) {
    if (f === path.join('lib', 'i18n.js')) continue;
    let inBlockComment = false;
    read(f).split('\n').forEach((line, i) => {
      const trimmed = line.trim();
      if (inBlockComment) {
        if (trimmed.includes('*/')) inBlockComment = false;
        return;
      }
      if (trimmed.startsWith('/*')) {
        inBlockComment = !trimmed.includes('*/');
        return;
      }
      if (trimmed.startsWith('//') || trimmed.startsWith('*')) return;
      if (/i18n-ok|console\.(log|warn|error|info|debug)|^import |^export .* from /.test(trimmed)) return;
      const code = line.replace(/\s\/\/ .*$/, '');
      for (const s of proseLiterals(code)) found.push(`${f}:${i + 1} ${JSON.stringify(s.slice(0, 80))}`);
    });
  }
  assert.deepEqual(found, [], `hard-coded words (use t('key') and the catalogue, or mark a line that never reaches a person with // i18n-ok: why)\n${found.join('\n')}`);
});

test('no HTML page has words outside the catalogue', () => {
  const found = [];
  for (const f of sourceFiles(['.html'])) {
    const html = read(f).replace(/<!--[^]*?-->/g, '').replace(/<(script|style)\b[^]*?<\/\1>/g, '');
    // text between tags: the tag before it must carry data-i18n
    for (const m of html.matchAll(/<([a-z][\w-]*)((?:[^>"']|"[^"]*"|'[^']*')*)>([^<]*)/g)) {
      const [, , attrs, text] = m;
      if (/[A-Za-z]{2,}/.test(text) && !/\bdata-i18n=/.test(attrs)) found.push(`${f}: text ${JSON.stringify(text.trim().slice(0, 60))}`);
      for (const a of ['title', 'placeholder', 'aria-label', 'alt']) {
        const v = attrs.match(new RegExp(`\\s${a}="([^"]*)"`));
        if (v && /[A-Za-z]{2,}/.test(v[1]) && !new RegExp(`data-i18n-${a}=`).test(attrs)) found.push(`${f}: ${a} ${JSON.stringify(v[1])}`);
      }
    }
  }
  assert.deepEqual(found, [], found.join('\n'));
});

test('the static pages name only keys of the catalogue', () => {
  const en = catalogue('en');
  const unknown = [];
  for (const f of sourceFiles(['.html'])) {
    for (const m of read(f).matchAll(/data-i18n(?:-[a-z-]+)?="([^"]*)"/g)) if (!(m[1] in en)) unknown.push(`${f}: ${m[1]}`);
  }
  const manifest = read('manifest.json');
  for (const m of manifest.matchAll(/__MSG_(\w+)__/g)) if (!(m[1] in en)) unknown.push(`manifest.json: ${m[1]}`);
  assert.deepEqual(unknown, []);
});

test('the literal scanner finds words and leaves technical strings alone', () => {
  assert.deepEqual(proseLiterals(`h('p', { text: 'No chats yet.' })`), ['No chats yet.']);
  assert.deepEqual(proseLiterals(`b.title = 'Copy';`), ['Copy']);
  assert.deepEqual(proseLiterals(`iconButton('edit', 'Rename', {})`), ['Rename']);
  assert.deepEqual(proseLiterals('h(\'b\', { title: `Load “${name}”` })'), ['Load “${name}”']);
  assert.deepEqual(proseLiterals(`if (e.key === 'Escape') close();`), []);
  assert.deepEqual(proseLiterals('const m = `Saved ${n} chats`;'), ['Saved ${n} chats']);
  assert.deepEqual(proseLiterals(`h('div', { class: 'btn btn-small' })`), []);
  assert.deepEqual(proseLiterals(`send('history.get', { upTo: 3 })`), []);
  assert.deepEqual(proseLiterals(`el.querySelector('.session-row [data-testid="x"]')`), []);
  assert.deepEqual(proseLiterals(`fetch('https://example.com/a b')`), []);
});

// ------------------------------------------------------------------------------------------- behaviour

test('the locale for a language tag', () => {
  assert.equal(localeFor('zh-CN'), 'zh_CN');
  assert.equal(localeFor('zh-Hans-SG'), 'zh_CN');
  assert.equal(localeFor('pt'), 'pt_BR');
  assert.equal(localeFor('pt-PT'), 'pt_BR');
  assert.equal(localeFor('en-GB'), 'en');
  assert.equal(localeFor('fr'), 'en');
  assert.equal(localeFor(''), 'en');
});

test('t substitutes, and names a missing key instead of showing nothing', () => {
  useLocale('en');
  const en = catalogue('en');
  const withSub = Object.keys(en).find((k) => en[k].message.includes('$1'));
  if (withSub) assert.ok(!t(withSub, 'XYZ').includes('$1') && t(withSub, 'XYZ').includes('XYZ'));
  assert.equal(t('noSuchKeyAnywhere'), 'noSuchKeyAnywhere');
  assert.equal(t('actionTitle'), en.actionTitle.message);
});

test('dates and numbers follow the UI language', () => {
  const when = Date.UTC(2026, 11, 6, 15, 4);
  useLocale('en');
  assert.equal(uiLocale(), 'en');
  assert.equal(formatNumber(12345.5), '12,345.5');
  useLocale('pt_BR');
  assert.equal(uiLocale(), 'pt-BR');
  assert.equal(formatNumber(12345.5), '12.345,5');
  assert.match(formatDateTime(when, { dateStyle: 'medium', timeZone: 'UTC' }), /6 de dez\.? de 2026/);
  useLocale('zh_CN');
  assert.equal(uiLocale(), 'zh-CN');
  assert.match(formatDateTime(when, { dateStyle: 'medium', timeZone: 'UTC' }), /2026年12月6日/);
  assert.equal(t('actionTitle'), catalogue('zh_CN').actionTitle.message);
  useLocale('en');
});
