import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeDom, byTestId, allByTestId } from '../test-support/fake-dom.js';
import { fakeSync } from '../test-support/fake-sync.js';
import { flush } from '../test-support/fakes.js';
import { formatDateTime, useLocale, t } from '../lib/i18n.js';
import { createSync, SYNC_POLL_MS, readStatus, deviceLabel, setupCommands, problemText, outboxText, keyText } from './sync.js';

let dom;
let clipboard;
let navigatorBefore;
beforeEach(() => {
  dom = installFakeDom();
  useLocale('en');
  clipboard = [];
  // the Clipboard API copyText writes to (node 20 has no navigator; 21+ has one without it)
  navigatorBefore = Object.getOwnPropertyDescriptor(globalThis, 'navigator');
  const nav = Object.create(globalThis.navigator ?? null);
  nav.clipboard = { writeText: async (s) => { clipboard.push(s); } };
  Object.defineProperty(globalThis, 'navigator', { value: nav, configurable: true, writable: true });
});
afterEach(() => {
  dom.restore();
  if (navigatorBefore) Object.defineProperty(globalThis, 'navigator', navigatorBefore);
  else delete globalThis.navigator;
});

const NOW = 1_800_000_000_000;
const DESK = '9a71d3c4-0000-4000-8000-000000000002';
const PHONE = '5b22e0f1-0000-4000-8000-000000000003';
const settle = async (n = 8) => { for (let i = 0; i < n; i++) await flush(); };

/** Timers the test fires by hand. */
function manualTimers() {
  const pending = new Map();
  let n = 0;
  return {
    setTimeout: (fn, ms) => { pending.set(++n, { fn, ms }); return n; },
    clearTimeout: (id) => { pending.delete(id); },
    fire() { const due = [...pending.values()]; pending.clear(); for (const x of due) x.fn(); },
    delays: () => [...pending.values()].map((x) => x.ms),
  };
}

async function mount(opts = {}, { os = 'linux', timers = manualTimers() } = {}) {
  const host = fakeSync({ now: () => NOW, ...opts });
  const el = document.createElement('div');
  document.body.append(el);
  const section = createSync({ el, storage: host.storage, explain: (e) => `explained ${e.code}: ${e.message}`, os: Promise.resolve(os), timers });
  await section.load();
  return { host, el, section, timers };
}

const text = (el, id) => byTestId(el, id)?.textContent;
const deviceRows = (el) => allByTestId(el, 'sync-device-row').map((r) => ({
  id: r.dataset.id, name: text(r, 'sync-device-row-name'), applied: text(r, 'sync-applied'), pending: text(r, 'sync-pending'), last: text(r, 'sync-last'),
}));

test('texts: the status read as PROTOCOL.md gives it, names, commands, problems in plain words', () => {
  assert.deepEqual(readStatus({ setUp: false, problems: [] }), {
    setUp: false, paused: false, folder: '', folderReachable: true, device: null, outboxPending: 0, looked: false, lastLookAt: null, key: null, devices: [], problems: [],
  });
  assert.equal(readStatus(null).setUp, false);
  const s = readStatus({
    setUp: true, device: { id: 'me', name: 'Mine', folder: '/f', createdAt: 1, paused: true }, running: true,
    key: { kept: 'databaseFile', secretStore: 'Secret Service', reachable: false, reason: 'no D-Bus session bus', ok: true, detail: '…' },
    folder: { path: '/f', reachable: true, detail: null }, outbox: 3,
    devices: [
      { id: 'me', name: 'Mine', self: true, segments: 9, applied: 0, pending: 0, waitingPictures: 0, opsApplied: 0 },
      { id: DESK, name: 'desk', self: false, segments: 7, applied: 6, pending: 1, waitingPictures: 2, opsApplied: 40, lastAppliedAt: Date.UTC(2027, 0, 15, 10) },
      { name: 'no id' },
    ],
    problems: [{ kind: 'pictures', device: DESK, detail: 'waiting for 2 pictures from desk' }, 'junk'],
    lastLookAt: NOW,
  });
  assert.deepEqual(s.devices, [{ id: DESK, name: 'desk', applied: 40, pending: 1, waitingPictures: 2, lastAppliedAt: Date.UTC(2027, 0, 15, 10) }],
    'the other devices only; applied = operations, pending = files not applied yet');
  assert.equal(s.paused, true);
  assert.equal(s.folder, '/f');
  assert.equal(s.outboxPending, 3);
  assert.equal(s.looked, true);
  assert.equal(s.problems.length, 1);
  assert.equal(deviceLabel({ id: DESK, name: '  ' }), '9a71d3c4', 'no name: the start of the id');
  assert.equal(deviceLabel({ id: DESK, name: 'desk' }), 'desk');

  assert.deepEqual(setupCommands('linux'), {
    init: 'keepsake-host sync init --folder ~/Sync/Keepsake',
    join: 'keepsake-host sync join --folder ~/Sync/Keepsake --key KEY',
    status: 'keepsake-host sync status',
    leave: 'keepsake-host sync leave',
  });
  assert.equal(setupCommands('win').init, 'keepsake-host sync init --folder $HOME\\Sync\\Keepsake', 'PowerShell: ~ reaches no program');

  assert.deepEqual(keyText(s.key), { text: 'In the database file, as plain text (never in the sync folder): no secret store was reachable.', reason: 'no D-Bus session bus' });
  assert.deepEqual(keyText({ kept: 'secretStore', secretStore: 'GNOME Keyring' }), { text: 'Kept in GNOME Keyring', reason: '' });

  const devices = [{ id: DESK, name: 'ana-desktop', waitingPictures: 3 }];
  const file = `keepsake/devices/${DESK}/000000000042.seg`;
  assert.deepEqual(problemText({ kind: 'damaged', device: DESK, file, detail: 'the tag does not check' }, { devices }),
    { text: 'A file from ana-desktop is damaged and was skipped (nothing of it was applied):', data: file, detail: '', commands: [] });
  assert.equal(problemText({ kind: 'damaged', device: PHONE }, { devices }).text, 'A file from 5b22e0f1 is damaged and was skipped (nothing of it was applied):');
  assert.equal(problemText({ kind: 'damaged' }).text, 'A file from another device is damaged and was skipped (nothing of it was applied):');
  assert.equal(problemText({ kind: 'foreign', file: 'keepsake/devices/x/1.seg' }).data, 'keepsake/devices/x/1.seg');
  assert.equal(problemText({ kind: 'pictures', device: DESK }, { devices }).text, 'Waiting for 3 pictures from ana-desktop: the changes that show them are applied once they arrive.');
  assert.equal(problemText({ kind: 'pictures', device: DESK }, { devices: [{ id: DESK, name: 'ana-desktop', waitingPictures: 1 }] }).text, 'Waiting for 1 picture from ana-desktop: the changes that show it are applied once it arrives.');
  assert.equal(problemText({ kind: 'pictures', device: PHONE }, { devices }).text, 'Waiting for pictures from 5b22e0f1: the changes that show them are applied once they arrive.');
  assert.deepEqual(problemText({ kind: 'key', detail: 'the Secret Service is locked' }, { os: 'linux' }), {
    text: 'This computer cannot use its sync key: the secret store is locked or does not have it, or it does not open the sync folder. Unlock the secret store; if that is not it, leave and join again with the key:',
    data: '', detail: 'the Secret Service is locked', commands: ['keepsake-host sync leave', 'keepsake-host sync join --folder ~/Sync/Keepsake --key KEY'],
  });
  assert.deepEqual(problemText({ kind: 'folder', detail: 'the sync folder /media/usb/Sync cannot be reached: No such file or directory' }, { folder: '/media/usb/Sync' }), {
    text: 'The sync folder cannot be reached (a drive not mounted, the folder moved or removed):', data: '/media/usb/Sync',
    detail: 'the sync folder /media/usb/Sync cannot be reached: No such file or directory', commands: [],
  });
  assert.deepEqual(problemText({ kind: 'clock', detail: 'a segment is stamped 3 days ahead' }),
    { text: 'The host reports:', data: '', detail: 'a segment is stamped 3 days ahead', commands: [] }, 'a kind this page does not know: the host\'s sentence');

  assert.equal(outboxText(0, false), '');
  assert.equal(outboxText(1, false), '1 change made here is being written to the sync folder.');
  assert.equal(outboxText(4, true), '4 changes made here wait: they are written to the sync folder when you resume.');
});

test('not set up: says so, no Pause, and how to set it up with the commands to copy', async () => {
  const { el } = await mount({ setUp: false });
  assert.equal(text(el, 'sync-state'), 'Sync is not set up on this computer.');
  assert.equal(byTestId(el, 'sync-state').dataset.state, 'off');
  assert.equal(byTestId(el, 'sync-toggle').hidden, true);
  assert.equal(byTestId(el, 'sync-known').hidden, true);
  assert.equal(text(el, 'sync-setup-heading'), 'Set up sync');
  assert.match(text(el, 'sync-how'), /Syncthing keeps the same on each of your computers; Keepsake puts only encrypted files there/);
  assert.match(text(el, 'sync-how-pair'), /^In Syncthing, add each computer as a remote device of the other and share that folder/);
  assert.equal(text(el, 'sync-cmd-init-text'), 'keepsake-host sync init --folder ~/Sync/Keepsake');
  assert.equal(text(el, 'sync-cmd-join-text'), 'keepsake-host sync join --folder ~/Sync/Keepsake --key KEY');
  assert.equal(byTestId(el, 'sync-cmd-leave'), null, 'nothing to leave');
  assert.equal(byTestId(el, 'sync-cmd-init-text').getAttribute('translate'), 'no', 'a command is not the UI\'s words');
  const copy = byTestId(el, 'sync-cmd-init-copy');
  assert.equal(copy.getAttribute('aria-label'), 'Copy command');
  assert.equal(copy.getAttribute('aria-describedby'), 'sync-cmd-init-text', 'which command: the command itself');
  assert.equal(byTestId(el, 'sync-cmd-init-text').id, 'sync-cmd-init-text');
  copy.click();
  await settle();
  assert.deepEqual(clipboard, ['keepsake-host sync init --folder ~/Sync/Keepsake']);
  assert.equal(byTestId(el, 'sync-cmd-init').textContent.endsWith('Copied'), true, 'it says it copied');
});

test('set up: this computer, the folder, every other device with what was applied and what waits, problems in plain words', async () => {
  const { el } = await mount({
    outbox: 2,
    devices: [
      { id: DESK, name: 'ana-desktop', segments: 40, applied: 37, opsApplied: 1234, pending: 3, waitingPictures: 3, lastAppliedAt: NOW - 60_000 },
      { id: PHONE, name: '', segments: 1, applied: 0, opsApplied: 0, pending: 0, lastAppliedAt: null },
    ],
    problems: [
      { kind: 'pictures', device: DESK, detail: 'waiting for 3 pictures from ana-desktop' },
      { kind: 'damaged', device: PHONE, file: `keepsake/devices/${PHONE}/000000000007.seg`, detail: 'the tag does not check' },
    ],
  }, { os: 'mac' });
  assert.equal(text(el, 'sync-state'), 'Syncing: changes made here go to the sync folder within a second, and the other devices\' changes are applied as they arrive.');
  assert.equal(byTestId(el, 'sync-state').dataset.state, 'on');
  assert.equal(text(el, 'sync-toggle'), 'Pause sync');
  assert.equal(byTestId(el, 'sync-toggle').hidden, false);
  assert.equal(text(el, 'sync-device-name'), 'ana-laptop');
  assert.equal(text(el, 'sync-device-id'), '3f0c2a9e-0000-4000-8000-000000000001');
  assert.equal(text(el, 'sync-folder-path'), '/home/ana/Sync/Keepsake');
  for (const id of ['sync-device-name', 'sync-device-id', 'sync-folder-path']) assert.equal(byTestId(el, id).getAttribute('translate'), 'no', `${id} is data`);
  assert.equal(text(el, 'sync-key'), 'Kept in GNOME Keyring');
  assert.equal(text(el, 'sync-last-look'), formatDateTime(NOW - 2_000));
  assert.equal(text(el, 'sync-outbox'), '2 changes made here are being written to the sync folder.');
  assert.deepEqual(deviceRows(el), [
    { id: DESK, name: 'ana-desktop', applied: '1,234', pending: '3', last: formatDateTime(NOW - 60_000) },
    { id: PHONE, name: '5b22e0f1', applied: '0', pending: '0', last: '—' },
  ]);
  assert.equal(el.querySelectorAll('table th[scope="col"]').length, 4, 'column headers');
  assert.equal(el.querySelectorAll('table th[scope="row"]').length, 2, 'each row is named by its device');
  const problems = allByTestId(el, 'sync-problem');
  assert.deepEqual(problems.map((p) => p.dataset.kind), ['pictures', 'damaged']);
  assert.equal(text(problems[0], 'sync-problem-text'), 'Waiting for 3 pictures from ana-desktop: the changes that show them are applied once they arrive.');
  assert.equal(text(problems[1], 'sync-problem-text'), 'A file from 5b22e0f1 is damaged and was skipped (nothing of it was applied):');
  assert.equal(text(problems[1], 'sync-problem-data'), `keepsake/devices/${PHONE}/000000000007.seg`);
  assert.equal(byTestId(problems[1], 'sync-problem-data').getAttribute('translate'), 'no');
  assert.equal(byTestId(problems[1], 'sync-problem-detail'), null, 'the host\'s English adds nothing here');
  // set up: how to add another computer, and how to stop
  assert.equal(text(el, 'sync-setup-heading'), 'Add another computer');
  assert.equal(byTestId(el, 'sync-cmd-init'), null, 'no second init');
  assert.match(text(el, 'sync-how-pair'), /^In Syncthing, add the new computer as a remote device/);
  assert.equal(text(el, 'sync-cmd-join-text'), 'keepsake-host sync join --folder ~/Sync/Keepsake --key KEY');
  assert.equal(text(el, 'sync-cmd-leave-text'), 'keepsake-host sync leave');
});

test('no other device yet, no problems: said in words; before the first look, not "none"', async () => {
  const { el } = await mount({});
  assert.equal(text(el, 'sync-devices-none'), 'No other device has written to the sync folder yet.');
  assert.equal(text(el, 'sync-problems-none'), 'None.');
  assert.equal(byTestId(el, 'sync-outbox').hidden, true, 'nothing waiting: no line');
  el.remove();
  const { el: early } = await mount({ running: false, lastLookAt: null });
  assert.equal(text(early, 'sync-devices-none'), 'This computer has not looked at the sync folder yet.');
  assert.equal(text(early, 'sync-last-look'), 'Not yet');
});

test('the key, the folder: the host\'s reason as data, and the way out to copy', async () => {
  const { el } = await mount({
    key: { kept: 'databaseFile', secretStore: 'Secret Service', reachable: false, reason: 'no D-Bus session bus', ok: false, detail: 'the sync key does not open this folder\'s keycheck' },
    problems: [
      { kind: 'key', detail: 'the sync key does not open this folder\'s keycheck: it is not this folder\'s key' },
      { kind: 'folder', detail: 'the sync folder /home/ana/Sync/Keepsake cannot be reached: No such file or directory (os error 2)' },
    ],
  });
  assert.equal(text(el, 'sync-key-text'), 'In the database file, as plain text (never in the sync folder): no secret store was reachable.');
  assert.equal(text(el, 'sync-key-reason'), 'no D-Bus session bus');
  assert.equal(byTestId(el, 'sync-key-reason').getAttribute('translate'), 'no');
  const [key, folder] = allByTestId(el, 'sync-problem');
  assert.equal(text(key, 'sync-problem-detail'), 'the sync key does not open this folder\'s keycheck: it is not this folder\'s key');
  assert.equal(byTestId(key, 'sync-problem-detail').getAttribute('translate'), 'no');
  assert.deepEqual(allByTestId(key, 'sync-problem-command').map((c) => c.textContent), ['keepsake-host sync leave', 'keepsake-host sync join --folder ~/Sync/Keepsake --key KEY']);
  allByTestId(key, 'sync-problem-copy')[1].click();
  await settle();
  assert.deepEqual(clipboard, ['keepsake-host sync join --folder ~/Sync/Keepsake --key KEY']);
  assert.equal(text(folder, 'sync-problem-data'), '/home/ana/Sync/Keepsake');
  assert.match(text(folder, 'sync-problem-detail'), /No such file or directory/);
});

test('Pause and Resume: the host is asked, the state follows, the focus stays on the button', async () => {
  const { el, host } = await mount({});
  host.hold('sync.pause');
  byTestId(el, 'sync-toggle').click();
  await settle();
  assert.equal(byTestId(el, 'sync-toggle').disabled, true, 'no second click while the host answers');
  assert.equal(byTestId(el, 'sync-toggle').getAttribute('aria-busy'), 'true');
  host.release();
  await settle();
  assert.deepEqual(host.ops().filter((o) => o !== 'sync.status'), ['sync.pause']);
  assert.equal(host.state.device.paused, true);
  assert.equal(text(el, 'sync-state'), 'Paused: nothing is read from or written to the sync folder. Chats go on as usual here; their changes are written when you resume.');
  assert.equal(byTestId(el, 'sync-state').dataset.state, 'paused');
  assert.equal(text(el, 'sync-toggle'), 'Resume sync');
  assert.equal(text(el, 'sync-toggle-result'), 'Sync paused.');
  assert.equal(document.activeElement, byTestId(el, 'sync-toggle'));
  assert.equal(byTestId(el, 'sync-toggle').disabled, false);

  byTestId(el, 'sync-toggle').click();
  await settle();
  assert.equal(host.state.device.paused, false);
  assert.equal(text(el, 'sync-toggle-result'), 'Sync resumed.');
  assert.equal(text(el, 'sync-toggle'), 'Pause sync');
});

test('a change waiting while paused is said so', async () => {
  const { el } = await mount({ paused: true, outbox: 1 });
  assert.equal(text(el, 'sync-outbox'), '1 change made here waits: it is written to the sync folder when you resume.');
  assert.equal(text(el, 'sync-toggle'), 'Resume sync');
});

test('a refused pause says why and changes nothing', async () => {
  const { el, host } = await mount({});
  host.failNext('sync.pause', host.hostError('internal', 'the sync folder cannot be written'));
  byTestId(el, 'sync-toggle').click();
  await settle();
  assert.equal(host.state.device.paused, false);
  assert.equal(text(el, 'sync-toggle-result'), 'Not paused: explained internal: the sync folder cannot be written');
  assert.equal(byTestId(el, 'sync-toggle-result').dataset.kind, 'error');
  assert.equal(text(el, 'sync-toggle'), 'Pause sync');
});

test('a host without the sync operations: the status says why, the way to set it up is still shown', async () => {
  const host = fakeSync();
  host.failNext('sync.status', host.hostError('unknown_op', 'unknown operation sync.status'));
  const el = document.createElement('div');
  document.body.append(el);
  await createSync({ el, storage: host.storage, explain: (e) => `explained ${e.code}`, os: 'linux', timers: manualTimers() }).load();
  assert.equal(text(el, 'sync-read-status'), 'Could not read the sync status: explained unknown_op');
  assert.equal(byTestId(el, 'sync-read-status').dataset.kind, 'error');
  assert.equal(byTestId(el, 'sync-toggle').hidden, true);
  assert.equal(text(el, 'sync-cmd-init-text'), 'keepsake-host sync init --folder ~/Sync/Keepsake');
});

test('read again on its own while shown: a device that wrote meanwhile appears; not while the page is hidden', async () => {
  const { el, host, timers } = await mount({});
  assert.deepEqual(timers.delays(), [SYNC_POLL_MS]);
  host.arrive(DESK, 5, 'ana-desktop');
  timers.fire();
  await settle();
  assert.deepEqual(deviceRows(el).map((r) => [r.name, r.applied]), [['ana-desktop', '5']]);
  assert.deepEqual(timers.delays(), [SYNC_POLL_MS], 'one timer at a time');
  const reads = host.ops().filter((o) => o === 'sync.status').length;
  document.visibilityState = 'hidden';
  timers.fire();
  await settle();
  assert.equal(host.ops().filter((o) => o === 'sync.status').length, reads, 'nothing read while hidden');
  assert.deepEqual(timers.delays(), [SYNC_POLL_MS], 'still looking');
  document.visibilityState = 'visible';
  timers.fire();
  await settle();
  assert.equal(host.ops().filter((o) => o === 'sync.status').length, reads + 1);
});

test('in Chinese and Portuguese: the catalogue\'s words', async () => {
  for (const loc of ['zh_CN', 'pt_BR']) {
    useLocale(loc);
    const { el } = await mount({ paused: true, devices: [{ id: DESK, name: 'ana-desktop', applied: 2, pending: 0, lastAppliedAt: NOW }] });
    assert.equal(text(el, 'sync-state'), t('optSyncPaused'));
    assert.equal(text(el, 'sync-toggle'), t('optSyncResume'));
    assert.notEqual(t('optSyncResume'), 'Resume sync');
    assert.equal(text(el, 'sync-setup-heading'), t('optSyncAddHeading'));
    el.remove();
  }
});
