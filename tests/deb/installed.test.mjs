// The installed Debian package (run by tests/deb/run.sh after `dpkg -i`, as root): the files dpkg
// put in place, `keepsake-host doctor` on the system-wide manifests, and Chromium reaching the
// packaged host with no per-profile registration at all.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { withKeepsake, hostCall, EXT_ID } from '../e2e/harness.mjs';
import { startMockLlm } from '../e2e/mock-llm.mjs';
import { sendAndAwaitReply } from '../e2e/panel.mjs';
import { live } from '../e2e/db.mjs';

const BIN = '/usr/bin/keepsake-host';
const EXT = '/usr/share/keepsake/extension';
const MANIFEST = 'dev.keepsake.host.json';
// the four Chromium-family folders (src/cli/browsers.rs system_locations); Chrome's also serves
// Brave and Opera
const SYSTEM_DIRS = [
  '/etc/opt/chrome/native-messaging-hosts',
  '/etc/chromium/native-messaging-hosts',
  '/etc/opt/edge/native-messaging-hosts',
  '/etc/opt/vivaldi/native-messaging-hosts',
];
const FIREFOX = `/usr/lib/mozilla/native-messaging-hosts/${MANIFEST}`;

if (process.getuid?.() !== 0 || !fs.existsSync('/var/lib/dpkg/info/keepsake-host.list')) {
  throw new Error('run through tests/deb/run.sh: it installs the package first (as root)');
}

/** A scratch HOME and database folder, so nothing reads or writes root's own. */
function scratchEnv(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-deb-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'home', '.config'), { recursive: true });
  return {
    dir,
    env: {
      PATH: process.env.PATH,
      HOME: path.join(dir, 'home'),
      XDG_CONFIG_HOME: path.join(dir, 'home', '.config'),
      KEEPSAKE_DB: path.join(dir, 'data', 'keepsake.db'),
    },
  };
}

test('dpkg installed the host, the manifests, the extension, man pages and completions', () => {
  const files = new Set(execFileSync('dpkg', ['-L', 'keepsake-host'], { encoding: 'utf8' }).trim().split('\n'));
  const want = [
    BIN,
    ...SYSTEM_DIRS.map((d) => `${d}/${MANIFEST}`),
    FIREFOX,
    `${EXT}/manifest.json`,
    `${EXT}/background/sw.js`,
    `${EXT}/sidepanel/sidepanel.html`,
    '/usr/share/man/man1/keepsake-host.1.gz',
    '/usr/share/man/man1/keepsake-host-doctor.1.gz',
    '/usr/share/bash-completion/completions/keepsake-host',
    '/usr/share/zsh/vendor-completions/_keepsake-host',
    '/usr/share/fish/vendor_completions.d/keepsake-host.fish',
    '/usr/share/doc/keepsake-host/copyright',
    '/usr/share/doc/keepsake-host/changelog.gz',
  ];
  for (const f of want) {
    assert.ok(files.has(f), `dpkg -L keepsake-host lists ${f}`);
    assert.ok(fs.statSync(f).isFile(), `${f} is a file`);
  }
  // the extension without its tests; the dev key keeps the ID the manifests allow
  const testFiles = [...files].filter((f) => f.startsWith(`${EXT}/`) && /\.test\.m?js$|\/test-support\//.test(f));
  assert.deepEqual(testFiles, []);
  const ext = JSON.parse(fs.readFileSync(`${EXT}/manifest.json`, 'utf8'));
  assert.equal(typeof ext.key, 'string');
  // conffiles: the /etc manifests (kept by `dpkg -r`, removed by purge)
  const conffiles = fs.readFileSync('/var/lib/dpkg/info/keepsake-host.conffiles', 'utf8').trim().split('\n').sort();
  assert.deepEqual(conffiles, SYSTEM_DIRS.map((d) => `${d}/${MANIFEST}`).sort());
  assert.equal(fs.statSync(BIN).mode & 0o7777, 0o755);

  for (const d of SYSTEM_DIRS) {
    const m = JSON.parse(fs.readFileSync(`${d}/${MANIFEST}`, 'utf8'));
    assert.deepEqual(m, {
      name: 'dev.keepsake.host',
      description: 'Keepsake storage host',
      path: BIN,
      type: 'stdio',
      allowed_origins: [`chrome-extension://${EXT_ID}/`],
    });
  }
  const ff = JSON.parse(fs.readFileSync(FIREFOX, 'utf8'));
  assert.equal(ff.path, BIN);
  assert.deepEqual(ff.allowed_extensions, ['keepsake@keepsake.dev']);

  // the man page and a completion come from this very binary's CLI
  const man = execFileSync('gzip', ['-dc', '/usr/share/man/man1/keepsake-host.1.gz'], { encoding: 'utf8' });
  assert.match(man, /^\.TH keepsake-host 1/m);
  assert.match(man, /keepsake\\-host\\-doctor\(1\)/);
  assert.equal(
    fs.readFileSync('/usr/share/bash-completion/completions/keepsake-host', 'utf8'),
    execFileSync(BIN, ['completions', 'bash'], { encoding: 'utf8' }),
  );
});

test('keepsake-host install --system finds the packaged manifests already current', (t) => {
  const { env } = scratchEnv(t);
  const out = execFileSync(BIN, ['install', '--system', '--dry-run', '--json'], { encoding: 'utf8', env });
  const r = JSON.parse(out);
  assert.equal(r.ok, true, out);
  assert.equal(r.binary, BIN);
  const mine = r.manifests.filter((m) => m.path.startsWith('/etc/'));
  assert.ok(mine.length >= 2, out);
  for (const m of mine) assert.equal(m.status, 'unchanged', `${m.path}: install --system would change the packaged file`);
});

test('keepsake-host doctor passes with the system-wide manifests', (t) => {
  const { env } = scratchEnv(t);
  const r = spawnSync(BIN, ['doctor', '--json'], { encoding: 'utf8', env, timeout: 30_000 });
  const report = JSON.parse(r.stdout);
  const failed = report.checks.filter((c) => c.status === 'fail');
  assert.deepEqual(failed, [], 'no failed check');
  assert.equal(r.status, 0, r.stderr);
  assert.equal(report.ok, true);
  const manifests = report.checks.filter((c) => c.check === 'manifest' && c.status === 'ok');
  for (const d of SYSTEM_DIRS) {
    const c = manifests.find((m) => m.file === `${d}/${MANIFEST}`);
    assert.ok(c, `doctor checked ${d}/${MANIFEST}: ${JSON.stringify(report.checks, null, 1)}`);
    assert.equal(c.runs, BIN);
    assert.match(c.browser, /^system-wide: /);
  }
  const folders = report.checks.filter((c) => c.check === 'folder permissions');
  assert.deepEqual(folders, [], 'the package folders are root-owned and not group/world-writable');
});

test('Chromium finds the packaged host through /etc/chromium and keeps a chat turn in SQLite', { timeout: 180_000 }, async (t) => {
  const REPLY = 'Packaged and delivered: the host came from /usr/bin.';
  const mock = await startMockLlm({ script: { text: REPLY, chunkSize: 7 } });
  t.after(() => mock.close());
  await withKeepsake(t, { hostInstalled: false, extDir: EXT, name: 'deb-installed' }, async (k) => {
    // nothing registered in the profile: the only manifest Chromium can find is the system one
    assert.equal(k.install, null);
    assert.equal(fs.existsSync(path.join(k.profileDir, 'NativeMessagingHosts', 'dev.keepsake.host.json')), false);

    const panel = await k.openPanel();
    const hello = await hostCall(panel, 'host.hello');
    assert.equal(hello.name, 'keepsake-host');
    assert.equal(hello.dbPath, k.dbPath, 'the host uses the test database (KEEPSAKE_DB reaches it)');
    const pids = k.hostPids();
    assert.ok(pids.length >= 1, 'a keepsake-host child of this Chromium runs');
    for (const pid of pids) assert.equal(fs.readlinkSync(`/proc/${pid}/exe`), BIN, `host pid ${pid} runs ${BIN}`);

    await hostCall(panel, 'settings.set', {
      map: {
        providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }],
        activeProvider: 'p1',
      },
    });
    const QUESTION = 'Where did this host come from?';
    await sendAndAwaitReply(panel, QUESTION, REPLY);
    const posts = mock.requests.filter((r) => r.method === 'POST');
    assert.deepEqual(posts.map((r) => r.lastUserText), [QUESTION], 'one chat request reached the mock LLM');

    const rows = live(k);
    assert.deepEqual(
      rows.map((r) => [r.role, r.text]),
      [
        ['user', QUESTION],
        ['assistant', REPLY],
      ],
    );
  });
});
