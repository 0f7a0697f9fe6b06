#!/usr/bin/env node
// Store-ready extension archives, from the same source (README "Store archives"):
//
//   node scripts/archives.mjs [OUT]      writes OUT (default dist/) :
//     keepsake-chrome.zip    for the Chrome Web Store (and Edge Add-ons): extension/ without tests,
//                            test support and the development `key` (the store gives the ID; register
//                            it with `keepsake-host install --extension-id <that ID>`)
//     keepsake-firefox.xpi   for addons.mozilla.org: the Firefox build (scripts/firefox.mjs, add-on
//                            ID keepsake@keepsake.dev)
//   and lints the Firefox build with Mozilla's `web-ext lint` (npm, pinned in
//   scripts/webext/package-lock.json), and the .xpi itself with the addons-linter it runs: exits 1
//   when either reports an error.
//
// Both archives are made by `web-ext build` (a plain zip of the folder). The staged folders stay
// beside them (OUT/chrome/, OUT/firefox/) for Load unpacked / Load Temporary Add-on.

import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { SOURCE, skipped, build as buildFirefox } from './firefox.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..');
const WEBEXT_DIR = path.join(HERE, 'webext');
const WEBEXT = path.join(WEBEXT_DIR, 'node_modules', '.bin', 'web-ext');

/** The Chrome Web Store manifest: the development key removed (the store signs with its own). */
export function storeManifest(m) {
  const out = structuredClone(m);
  delete out.key;
  return out;
}

/** extension/ as the Chrome Web Store gets it, in `out` (emptied first). */
export function buildChrome(out) {
  const manifest = storeManifest(JSON.parse(readFileSync(path.join(SOURCE, 'manifest.json'), 'utf8')));
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  cpSync(SOURCE, out, { recursive: true, filter: (src) => path.relative(SOURCE, src) === '' || !skipped(path.relative(SOURCE, src)) });
  writeFileSync(path.join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  if (r.error) throw r.error;
  return r;
}

/** web-ext, installed from the lockfile the first time. */
function webExt() {
  if (!existsSync(WEBEXT)) {
    const r = run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: WEBEXT_DIR, stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`npm ci in ${WEBEXT_DIR} failed`);
  }
  return WEBEXT;
}

/** `web-ext build` of `dir` into `out/name`. */
function zip(dir, out, name) {
  const tmp = `${name}.zip`;
  const r = run(webExt(), ['build', '--source-dir', dir, '--artifacts-dir', out, '--filename', tmp, '--overwrite-dest', '--no-config-discovery'], { cwd: ROOT });
  if (r.status !== 0) throw new Error(`web-ext build of ${dir} failed:\n${r.stdout}\n${r.stderr}`);
  if (tmp !== name) renameSync(path.join(out, tmp), path.join(out, name));
  return path.join(out, name);
}

function report(r, what) {
  const start = r.stdout.indexOf('{');
  if (start < 0) throw new Error(`${what} printed no report:\n${r.stdout}\n${r.stderr}`);
  const j = JSON.parse(r.stdout.slice(start));
  return { errors: j.errors ?? [], warnings: j.warnings ?? [], notices: j.notices ?? [], summary: j.summary };
}

/**
 * `web-ext lint` of the Firefox build's folder → {errors, warnings, notices} (the messages).
 * @param {string} dir
 */
export function lint(dir) {
  const r = run(webExt(), ['lint', '--source-dir', dir, '--output', 'json', '--no-config-discovery'], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
  return report(r, 'web-ext lint');
}

/** The archive itself, as addons.mozilla.org receives it, through the linter web-ext lint runs. */
export function lintArchive(xpi) {
  const r = run(path.join(WEBEXT_DIR, 'node_modules', '.bin', 'addons-linter'), ['--output', 'json', xpi], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
  return report(r, 'addons-linter');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = path.resolve(process.argv[2] ?? path.join(ROOT, 'dist'));
  mkdirSync(out, { recursive: true });
  const chromeDir = path.join(out, 'chrome');
  const firefoxDir = path.join(out, 'firefox');
  buildChrome(chromeDir);
  buildFirefox(firefoxDir);
  const chromeZip = zip(chromeDir, out, 'keepsake-chrome.zip');
  const xpi = zip(firefoxDir, out, 'keepsake-firefox.xpi');
  const folder = lint(firefoxDir);
  const archive = lintArchive(xpi);
  const line = (m) => `  ${m.code}: ${m.message}${m.file ? ` (${m.file})` : ''}`;
  const counts = (x) => `${x.errors.length} errors, ${x.warnings.length} warnings, ${x.notices.length} notices`;
  console.log(`wrote ${chromeZip} and ${xpi}`);
  console.log(`web-ext lint of the Firefox build: ${counts(folder)}`);
  for (const m of [...folder.errors, ...folder.warnings]) console.log(line(m));
  console.log(`addons-linter of keepsake-firefox.xpi: ${counts(archive)}`);
  for (const m of archive.errors) console.log(line(m));
  process.exit(folder.errors.length === 0 && archive.errors.length === 0 ? 0 : 1);
}
