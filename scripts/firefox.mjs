#!/usr/bin/env node
// The Firefox build of the extension, from the same source (README "Firefox"):
//
//   node scripts/firefox.mjs [OUT]        writes OUT (default dist/firefox/), replacing it
//
// It copies extension/ (without tests, test support, fixtures and the README) and rewrites only
// the manifest: a sidebar (sidebar_action) instead of Chromium's side panel, a background page
// running the same module (background.scripts; Firefox runs no extension service worker), the
// add-on ID keepsake@keepsake.dev (`keepsake-host install` names it in the Mozilla manifest's
// allowed_extensions), no `key`, no `sidePanel` / `offscreen` permission. The code's few
// differences are in extension/lib/platform.js. No dependencies: node 20+ only.

import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SOURCE = path.join(ROOT, 'extension');
export const DEFAULT_OUT = path.join(ROOT, 'dist', 'firefox');
/**
 * The add-on ID: src/cli/browsers.rs FIREFOX_ADDON_ID, the ID the host trusts built in and every
 * manifest Keepsake writes lists (tests/it/conventions.rs checks they are equal). It is Keepsake's
 * because Keepsake's signed addons.mozilla.org listing holds it (docs/platform.md §13).
 */
export const GECKO_ID = 'keepsake@keepsake.dev';
/**
 * The oldest Firefox it is meant for: ESR 128 has everything used (MV3 module background
 * scripts, storage.session, sidebarAction.open, menus); Debian ships ESR 128 or newer.
 */
export const STRICT_MIN_VERSION = '128.0';
/** Chromium-only permissions: the side panel and offscreen documents (lib/platform.js). */
const CHROMIUM_ONLY_PERMISSIONS = new Set(['sidePanel', 'offscreen']);

/**
 * The Firefox manifest made from Chromium's.
 * @param {any} m extension/manifest.json
 */
export function firefoxManifest(m) {
  const out = structuredClone(m);
  delete out.key; // Chromium's fixed development ID; Firefox's ID is gecko.id
  delete out.minimum_chrome_version;
  delete out.side_panel;
  out.permissions = (m.permissions ?? []).filter((p) => !CHROMIUM_ONLY_PERMISSIONS.has(p));
  const sw = m.background?.service_worker;
  if (!sw) throw new Error('extension/manifest.json has no background.service_worker');
  out.background = { scripts: [sw], type: m.background.type ?? 'module' };
  const panel = m.side_panel?.default_path;
  if (!panel) throw new Error('extension/manifest.json has no side_panel.default_path');
  out.sidebar_action = {
    default_panel: panel,
    default_title: m.action?.default_title ?? m.name,
    open_at_install: false,
  };
  out.browser_specific_settings = {
    gecko: {
      id: GECKO_ID,
      strict_min_version: STRICT_MIN_VERSION,
      // chat data goes only to the provider the person configures and to the local host
      data_collection_permissions: { required: ['none'] },
    },
  };
  return out;
}

/** Files of extension/ that are not part of the add-on. */
export function skipped(rel) {
  const parts = rel.split(path.sep);
  const base = parts.at(-1);
  return (
    parts.includes('test-support') ||
    parts.includes('fixtures') ||
    parts.includes('node_modules') ||
    base.endsWith('.test.js') ||
    (parts.length === 1 && ['README.md', 'package.json', 'manifest.json'].includes(base))
  );
}

/**
 * Write the Firefox build to `out` (emptied first). Returns the manifest written.
 * @param {string} [out]
 */
export function build(out = DEFAULT_OUT) {
  const manifest = firefoxManifest(JSON.parse(readFileSync(path.join(SOURCE, 'manifest.json'), 'utf8')));
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  cpSync(SOURCE, out, {
    recursive: true,
    filter: (src) => {
      const rel = path.relative(SOURCE, src);
      return rel === '' || !skipped(rel);
    },
  });
  writeFileSync(path.join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = path.resolve(process.argv[2] ?? DEFAULT_OUT);
  const m = build(out);
  console.log(`wrote ${out} (Firefox ${m.browser_specific_settings.gecko.strict_min_version}+, add-on ID ${GECKO_ID})`);
  console.log('load it in Firefox: about:debugging#/runtime/this-firefox → Load Temporary Add-on… → its manifest.json');
}
