// sidepanel.html fetches the panel's whole module graph up front (<link rel="modulepreload">) and runs
// boot.js during parsing, so the first history.get leaves before sidepanel.js has loaded. These
// tests keep that list equal to the real static import graph: a module missing from it would be
// fetched only after its importer (a waterfall on the panel's first paint), an extra one for nothing.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const html = fs.readFileSync(path.join(here, 'sidepanel.html'), 'utf8');

const attrs = (tag) => Object.fromEntries([...tag.matchAll(/([a-z-]+)(?:="([^"]*)")?/g)].slice(1).map((m) => [m[1], m[2] ?? '']));
const tags = (name) => [...html.matchAll(new RegExp(`<${name}\\b[^>]*>`, 'g'))].map((m) => attrs(m[0]));
const abs = (rel) => path.resolve(here, rel);

/** Every module reachable from `entry` through static imports (`import … from '…'`, `import '…'`). */
function staticGraph(entry) {
  const seen = new Set();
  const visit = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const src = fs.readFileSync(file, 'utf8');
    for (const m of src.matchAll(/^\s*(?:import|export)\s+(?:[^'"]*?\s+from\s+)?'([^']+)'/gm)) {
      if (m[1].startsWith('.')) visit(path.resolve(path.dirname(file), m[1]));
    }
  };
  visit(entry);
  return seen;
}

const scripts = tags('script').map((a) => ({ src: abs(a.src), module: a.type === 'module', async: 'async' in a, defer: 'defer' in a }));
const preloads = tags('link').filter((a) => a.rel === 'modulepreload').map((a) => abs(a.href));

test('sidepanel.html: boot.js is a plain classic script ahead of the stylesheet, then the entry module', () => {
  assert.deepEqual(scripts.map((s) => path.basename(s.src)), ['boot.js', 'sidepanel.js']);
  const [boot, entry] = scripts;
  assert.equal(boot.module || boot.async || boot.defer, false, 'boot.js must run during parsing');
  const at = (needle) => html.indexOf(needle);
  assert.ok(at('src="boot.js"') < at('rel="stylesheet"'), 'a script after a stylesheet waits for it to load');
  assert.equal(entry.module, true);
  assert.equal(staticGraph(entry.src).has(boot.src), false, 'boot.js is not a module');
});

test('sidepanel.html preloads exactly the static import graph of sidepanel.js', () => {
  const graph = staticGraph(abs('sidepanel.js'));
  const rel = (f) => path.relative(here, f);
  const missing = [...graph].filter((f) => !preloads.includes(f));
  assert.deepEqual(missing.map(rel), [], `add <link rel="modulepreload" href="…"> to sidepanel.html for: ${missing.map(rel).join(', ')}`);
  const extra = preloads.filter((f) => !graph.has(f));
  assert.deepEqual(extra.map(rel), [], 'sidepanel.html preloads modules sidepanel.js does not import');
  assert.equal(new Set(preloads).size, preloads.length, 'a module is preloaded twice');
  for (const f of preloads) assert.ok(fs.existsSync(f), `${rel(f)} does not exist`);
});
