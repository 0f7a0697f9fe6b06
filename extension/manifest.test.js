// node --test extension/manifest.test.js
//
// The extension pages' Content Security Policy (issue 18). It covers the side panel, the options
// page and the service worker (measured in Chromium: the worker's fetches and sockets obey
// connect-src, and its `securitypolicyviolation` events fire). tests/e2e/hardening.e2e.mjs loads
// every page and the worker with it and checks that nothing is blocked and that it is enforced.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const manifest = JSON.parse(readFileSync(new URL('./manifest.json', import.meta.url), 'utf8'));

/** `a b; c d e` → Map {a → [b], c → [d, e]} (directive names lower-cased, first one wins as in CSP). */
function parseCsp(text) {
  const out = new Map();
  for (const part of String(text).split(';')) {
    const [name, ...values] = part.trim().split(/\s+/);
    if (name && !out.has(name.toLowerCase())) out.set(name.toLowerCase(), values);
  }
  return out;
}

test('extension pages have a full CSP: nothing but the extension itself, except what the pages need', () => {
  const csp = parseCsp(manifest.content_security_policy?.extension_pages);
  const expected = {
    'default-src': ["'self'"], // anything not named below: the extension's own files only
    'script-src': ["'self'"], // no inline script, no eval, no remote code (MV3 allows no less)
    'style-src': ["'self'"], // stylesheets only; element.style from scripts is not affected
    'img-src': ["'self'", 'data:', 'blob:'], // pasted/captured pictures (data:), stored ones shown as blob:
    'font-src': ["'self'"],
    // Providers are any base URL a person sets (OpenAI, Anthropic, OpenRouter, a proxy, Ollama or LM
    // Studio on this or another machine), so hosts cannot be listed. https: covers remote APIs; http:
    // is needed for local servers, including LAN ones on plain http (127.0.0.0/8 as a whole cannot be
    // written in CSP, nor another machine). Options warns before saving non-loopback http, and
    // llm.js never follows a redirect, so the key only goes to the configured address. What this
    // still refuses: ws:, wss:, data:, blob:, file: and every other scheme.
    'connect-src': ["'self'", 'https:', 'http:'],
    'object-src': ["'none'"],
    'base-uri': ["'none'"],
    'form-action': ["'none'"], // forms are handled in script (submit → preventDefault)
    'frame-ancestors': ["'none'"], // enforced for extension pages (Chromium refuses to frame them)
  };
  assert.deepEqual(Object.fromEntries(csp), expected);
});

test('no page relaxes the policy: no unsafe-* source, no wildcard, no remote script or style', () => {
  const text = manifest.content_security_policy.extension_pages;
  assert.doesNotMatch(text, /unsafe-(inline|eval|hashes)|wasm-unsafe-eval|\*/);
  const csp = parseCsp(text);
  for (const d of ['script-src', 'style-src', 'font-src', 'default-src']) {
    assert.deepEqual(csp.get(d), ["'self'"], d);
  }
  assert.equal(manifest.content_security_policy.sandbox, undefined, 'no sandboxed pages');
  assert.equal(manifest.web_accessible_resources, undefined, 'no page is reachable from web pages');
});

test('the HTML pages hold no inline script, inline style or style attribute (style-src/script-src self)', () => {
  for (const page of ['sidepanel/sidepanel.html', 'options/options.html']) {
    const html = readFileSync(new URL(`./${page}`, import.meta.url), 'utf8');
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/i, `${page}: an inline <script>`);
    assert.doesNotMatch(html, /<style[\s>]/i, `${page}: an inline <style>`);
    assert.doesNotMatch(html, /\sstyle\s*=/i, `${page}: a style attribute`);
    assert.doesNotMatch(html, /\son[a-z]+\s*=/i, `${page}: an inline event handler`);
    assert.doesNotMatch(html, /<base[\s>]/i, `${page}: a <base> element`);
  }
});

test('every module of the extension parses (pages load modules node --test never imports)', async () => {
  const { spawnSync } = await import('node:child_process');
  const { readdirSync, statSync } = await import('node:fs');
  const { join } = await import('node:path');
  const root = new URL('.', import.meta.url).pathname;
  const files = [];
  const walk = (dir) => {
    for (const f of readdirSync(dir)) {
      const p = join(dir, f);
      if (['vendor', 'node_modules'].includes(f)) continue;
      if (statSync(p).isDirectory()) walk(p);
      else if (f.endsWith('.js')) files.push(p);
    }
  };
  walk(root);
  assert.ok(files.length > 50);
  // --check parses each file as what it is (the package says "type": "module")
  const bad = files.map((f) => [f, spawnSync(process.execPath, ['--check', f], { encoding: 'utf8' })]).filter(([, r]) => r.status !== 0).map(([f, r]) => `${f}: ${r.stderr.split('\n').find((l) => /Error/.test(l))}`);
  assert.deepEqual(bad, []);
});

/** Every file under `dir`, as paths relative to it. */
async function filesUnder(dir) {
  const { readdirSync, statSync } = await import('node:fs');
  const path = await import('node:path');
  const files = [];
  const walk = (d) => {
    for (const f of readdirSync(d)) {
      const p = path.join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else files.push(path.relative(dir, p));
    }
  };
  walk(dir);
  return files;
}

// The Firefox build (scripts/firefox.mjs, README "Firefox"): the same files, its own manifest.
test('the Firefox build: sidebar, background page, gecko ID, no Chromium-only keys, every file it names', async () => {
  const { build, GECKO_ID } = await import('../scripts/firefox.mjs');
  const { mkdtempSync, rmSync, existsSync } = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const out = mkdtempSync(path.join(os.tmpdir(), 'keepsake-firefox-'));
  try {
    build(out);
    const ff = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    assert.equal(GECKO_ID, 'keepsake@keepsake.dev');
    assert.equal(ff.browser_specific_settings.gecko.id, 'keepsake@keepsake.dev');
    assert.match(ff.browser_specific_settings.gecko.strict_min_version, /^\d+\.0$/);
    assert.equal(ff.key, undefined);
    assert.equal(ff.side_panel, undefined);
    assert.equal(ff.minimum_chrome_version, undefined);
    assert.deepEqual(ff.background, { scripts: [manifest.background.service_worker], type: 'module' });
    assert.equal(ff.sidebar_action.default_panel, manifest.side_panel.default_path);
    assert.deepEqual(ff.permissions, manifest.permissions.filter((p) => p !== 'sidePanel' && p !== 'offscreen'));
    assert.ok(ff.permissions.includes('nativeMessaging'));
    assert.deepEqual(ff.content_security_policy, manifest.content_security_policy, 'the same policy in both');
    for (const f of [...ff.background.scripts, ff.sidebar_action.default_panel, ff.options_ui.page, 'lib/platform.js', 'lib/native-port.js']) {
      assert.ok(existsSync(path.join(out, f)), `${f} is in the build`);
    }
    const files = await filesUnder(out);
    assert.deepEqual(files.filter((f) => f.endsWith('.test.js') || f.includes('test-support')), [], 'no tests shipped');
    assert.ok(files.includes(path.join('_locales', 'zh_CN', 'messages.json')));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

// The Chrome Web Store archive's folder (scripts/archives.mjs, README "Store archives").
test('the Chrome Web Store build: the same manifest without the development key, no tests shipped', async () => {
  const { buildChrome } = await import('../scripts/archives.mjs');
  const { mkdtempSync, rmSync } = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const out = mkdtempSync(path.join(os.tmpdir(), 'keepsake-chrome-'));
  try {
    buildChrome(out);
    const store = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    assert.ok(manifest.key, 'the source keeps its development key');
    assert.equal(store.key, undefined, 'the store gives the ID: no key');
    const { key, ...rest } = manifest;
    assert.deepEqual(store, rest, 'nothing else changes');
    const files = await filesUnder(out);
    assert.deepEqual(files.filter((f) => f.endsWith('.test.js') || f.includes('test-support') || f === 'package.json'), []);
    assert.ok(files.includes(path.join('sidepanel', 'sidepanel.html')));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
