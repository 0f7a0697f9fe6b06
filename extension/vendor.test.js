// extension/vendor/ holds exact copies of the pinned libraries (vendor/package.json, copied by
// vendor/copy.mjs): this fails when a copied file differs from the package test.sh installed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { OUT, VENDORED, differences } from '../vendor/copy.mjs';

test('every vendored file is the pinned package\'s file, byte for byte', () => {
  assert.deepEqual(differences(), []);
});

test('a vendored file that differs from its package is found', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-vendor-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.cpSync(OUT, dir, { recursive: true });
  assert.deepEqual(differences(dir), [], 'the copy agrees before the edit');
  const file = path.join(dir, VENDORED[0].to, path.basename(VENDORED[0].files[0]));
  fs.appendFileSync(file, '\n// edited\n');
  assert.match(differences(dir).join('\n'), /readability\/Readability\.js differs from @mozilla\/readability@/);
});
