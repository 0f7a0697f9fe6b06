// Smoke: the worker starts, the host is registered by `keepsake-host install --user-data-dir`,
// and `host.hello` through the bridge answers from a database inside the test's temp data dir.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import fs from 'node:fs';
import { withKeepsake, hostCall, HOST_BIN, EXT_ID } from './harness.mjs';
import { PROTOCOL_VERSION } from '../../extension/lib/protocol.js';

test('smoke: worker ready, host.hello through the bridge', { timeout: 90_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    // registered by the real installer, pointing at the built binary, for our fixed ID
    assert.equal(k.install.via, 'install', 'the manifest must come from `keepsake-host install --user-data-dir`');
    assert.equal(k.install.report.ok, true);
    assert.deepEqual(k.install.report.manifests.map((m) => m.browser), ['profile'], 'only the test profile was touched');
    const manifest = JSON.parse(fs.readFileSync(k.install.manifestPath, 'utf8'));
    assert.equal(manifest.name, 'dev.keepsake.host');
    assert.equal(manifest.path, HOST_BIN);
    assert.deepEqual(manifest.allowed_origins, [`chrome-extension://${EXT_ID}/`]);

    assert.equal(await k.worker.evaluate(() => self.__keepsakeReady), true);

    const panel = await k.openPanel();
    const hello = await hostCall(panel, 'host.hello');
    assert.equal(hello.name, 'keepsake-host');
    assert.match(hello.version, /^\d+\.\d+\.\d+/);
    assert.equal(hello.protocolVersion, PROTOCOL_VERSION);
    assert.equal(hello.dbError, null);
    assert.equal(path.dirname(hello.dbPath), k.dataDir, 'dbPath must be inside the temp data dir');
    assert.equal(hello.dbPath, k.dbPath);

    // the database really exists there and is the host's (schema applied)
    const [about] = k.sql("SELECT count(*) AS n FROM about WHERE name = 'history_entries'");
    assert.equal(about.n, 1);
    const [{ n }] = k.sql('SELECT count(*) AS n FROM history_entries');
    assert.equal(n, 0);

    // the host was started by this browser (its parent chain leads to our chromium)
    assert.ok(k.hostPids().length >= 1, 'a keepsake-host child of this browser runs');
  });
});
