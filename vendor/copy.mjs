// The libraries the extension runs in pages, pinned in vendor/package.json (installed with
// `npm ci` here) and copied into extension/vendor/ so the extension needs no build step: Load
// unpacked works on the repository as it is.
//
//   node vendor/copy.mjs          copy every file below, write extension/vendor/VENDORED.json
//   node vendor/copy.mjs --check  copy nothing; exit 1 when a copied file or its record differs
//                                 from the pinned package (extension/vendor.test.js runs this check)

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const OUT = path.join(HERE, '..', 'extension', 'vendor');
export const RECORD = path.join(OUT, 'VENDORED.json');

// highlight.js: the core and a subset of its languages (lib/highlight.js registers them), as the ES
// modules of its CDN build; code blocks in replies load them on first use
const HLJS_LANGUAGES = [
  'bash', 'c', 'cpp', 'csharp', 'css', 'diff', 'dockerfile', 'go', 'ini', 'java', 'javascript', 'json',
  'kotlin', 'lua', 'makefile', 'markdown', 'php', 'plaintext', 'powershell', 'python', 'ruby', 'rust', 'scss',
  'shell', 'sql', 'swift', 'typescript', 'xml', 'yaml',
];
// KaTeX fonts: only the woff2 files (katex.min.css lists woff2 first; Chromium never asks for the others)
const KATEX_FONTS = [
  'AMS-Regular', 'Caligraphic-Bold', 'Caligraphic-Regular', 'Fraktur-Bold', 'Fraktur-Regular', 'Main-Bold',
  'Main-BoldItalic', 'Main-Italic', 'Main-Regular', 'Math-BoldItalic', 'Math-Italic', 'SansSerif-Bold',
  'SansSerif-Italic', 'SansSerif-Regular', 'Script-Regular', 'Size1-Regular', 'Size2-Regular', 'Size3-Regular',
  'Size4-Regular', 'Typewriter-Regular',
];

/**
 * What is copied: the package, its files, the folder under extension/vendor/. A file keeps only its
 * name there, unless it lies under `keep` (then its path below `keep` is kept: KaTeX's CSS finds its
 * fonts in `fonts/`).
 */
export const VENDORED = [
  { pkg: '@mozilla/readability', files: ['Readability.js', 'LICENSE.md'], to: 'readability' },
  // PDF.js: the library and its worker (offscreen/pdf.js reads PDFs with them)
  { pkg: 'pdfjs-dist', files: ['build/pdf.min.mjs', 'build/pdf.worker.min.mjs', 'LICENSE'], to: 'pdfjs' },
  {
    pkg: '@highlightjs/cdn-assets',
    files: ['es/core.min.js', ...HLJS_LANGUAGES.map((l) => `es/languages/${l}.min.js`), 'LICENSE'],
    keep: 'es/',
    to: 'highlight',
  },
  // KaTeX: the ES module (lib/math.js), its stylesheet and fonts
  {
    pkg: 'katex',
    files: ['dist/katex.mjs', 'dist/katex.min.css', ...KATEX_FONTS.map((f) => `dist/fonts/KaTeX_${f}.woff2`), 'LICENSE'],
    keep: 'dist/',
    to: 'katex',
  },
];

/** Where `file` of a VENDORED entry goes, relative to extension/vendor/. */
const target = (entry, file) => `${entry.to}/${entry.keep && file.startsWith(entry.keep) ? file.slice(entry.keep.length) : path.basename(file)}`;

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');

/** The pinned version of `pkg` (vendor/package.json) and the installed one. */
function versions(pkg) {
  const pinned = JSON.parse(fs.readFileSync(path.join(HERE, 'package.json'), 'utf8')).dependencies?.[pkg];
  const manifest = path.join(HERE, 'node_modules', pkg, 'package.json');
  const installed = fs.existsSync(manifest) ? JSON.parse(fs.readFileSync(manifest, 'utf8')).version : null;
  return { pinned, installed };
}

/** The record of what extension/vendor/ should hold, read from the installed packages. */
export function expectedRecord() {
  return VENDORED.map((entry) => {
    const { pkg, files } = entry;
    const { pinned, installed } = versions(pkg);
    if (!installed) throw new Error(`${pkg} is not installed: run npm ci in vendor/`);
    if (installed !== pinned) throw new Error(`${pkg}: vendor/package.json pins ${pinned}, node_modules has ${installed}: run npm ci in vendor/`);
    return {
      package: pkg,
      version: installed,
      files: files.map((f) => ({ from: f, to: target(entry, f), sha256: sha256(fs.readFileSync(path.join(HERE, 'node_modules', pkg, f))) })),
    };
  });
}

/** Every difference between `dir` (extension/vendor/) and the pinned packages (empty: they agree). */
export function differences(dir = OUT) {
  const want = expectedRecord();
  const out = [];
  const record = path.join(dir, 'VENDORED.json');
  const have = fs.existsSync(record) ? fs.readFileSync(record, 'utf8') : '';
  if (have !== `${JSON.stringify(want, null, 2)}\n`) out.push('extension/vendor/VENDORED.json differs from the pinned packages');
  for (const p of want) {
    for (const f of p.files) {
      const copy = path.join(dir, f.to);
      if (!fs.existsSync(copy)) out.push(`extension/vendor/${f.to} is missing (${p.package} ${f.from})`);
      else if (sha256(fs.readFileSync(copy)) !== f.sha256) out.push(`extension/vendor/${f.to} differs from ${p.package}@${p.version} ${f.from}`);
    }
  }
  return out;
}

function copyAll() {
  const want = expectedRecord();
  for (const p of want) {
    for (const f of p.files) {
      const to = path.join(OUT, f.to);
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.copyFileSync(path.join(HERE, 'node_modules', p.package, f.from), to);
    }
  }
  fs.writeFileSync(RECORD, `${JSON.stringify(want, null, 2)}\n`);
  return want;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--check')) {
    const diff = differences();
    for (const d of diff) console.error(d);
    process.exit(diff.length ? 1 : 0);
  }
  for (const p of copyAll()) console.log(`${p.package}@${p.version}: ${p.files.map((f) => f.to).join(', ')}`);
}
