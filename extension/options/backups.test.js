import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeDom, byTestId, allByTestId, fire } from '../test-support/fake-dom.js';
import { fakeBackups } from '../test-support/fake-backups.js';
import { flush } from '../test-support/fakes.js';
import { formatDateTime, useLocale } from '../lib/i18n.js';
import {
  createBackups, LIST_POLL_MS, LIST_SOON_MS, copyFacts, newestFirst, restoreQuestion, lastText, readBackupForm, backupSettings, fieldOfError, kindText, timeMs,
} from './backups.js';

let dom;
beforeEach(() => { dom = installFakeDom(); useLocale('en'); });
afterEach(() => dom.restore());

const DAY = 864e5;
const NOW = 1_800_000_000_000;
const settle = async (n = 8) => { for (let i = 0; i < n; i++) await flush(); };

/** Timers the test fires by hand: `pending` holds `{fn, ms}`. */
function manualTimers() {
  const pending = new Map();
  let n = 0;
  return {
    pending,
    setTimeout: (fn, ms) => { pending.set(++n, { fn, ms }); return n; },
    clearTimeout: (id) => { pending.delete(id); },
    /** Run what is due (every pending timer), once. */
    fire() { const due = [...pending.values()]; pending.clear(); for (const x of due) x.fn(); },
    delays: () => [...pending.values()].map((x) => x.ms),
  };
}

/** The section built into a container, loaded. */
async function mount(opts = {}, timers = manualTimers()) {
  const host = fakeBackups({
    chats: ['Today 1', 'Today 2', 'Today 3'],
    copies: [
      { kind: 'daily', createdAt: NOW - DAY, chats: ['Yesterday 1', 'Yesterday 2'] },
      { kind: 'weekly', createdAt: NOW - 9 * DAY, chats: ['Old'] },
      { kind: 'premigration', createdAt: NOW - 30 * DAY, chats: [], schemaVersion: 5 },
    ],
    now: () => NOW,
    ...opts,
  });
  const el = document.createElement('div');
  document.body.append(el);
  const restored = [];
  const section = createBackups({ el, storage: host.storage, explain: (e) => `explained ${e.code}: ${e.message}`, onRestored: () => restored.push(true), timers });
  await section.load();
  return { host, el, section, restored, timers };
}

const rows = (el) => allByTestId(el, 'backup-row').map((r) => ({
  id: r.dataset.id, kind: byTestId(r, 'backup-kind').textContent, time: byTestId(r, 'backup-time').textContent,
  schema: byTestId(r, 'backup-schema').textContent, chats: byTestId(r, 'backup-chats').textContent, size: byTestId(r, 'backup-size').textContent,
}));

test('texts: kinds, times, counts, the question, the last outcome', () => {
  assert.equal(kindText('daily'), 'Daily');
  assert.equal(kindText('weekly'), 'Weekly');
  assert.equal(kindText('premigration'), 'Before an upgrade');
  assert.equal(kindText('prerestore'), 'Before a restore');
  assert.equal(kindText('manual'), 'Made by you');
  assert.equal(timeMs('2026-06-05T03:00:00Z'), Date.UTC(2026, 5, 5, 3));
  assert.ok(Number.isNaN(timeMs(undefined)));
  const f = copyFacts({ kind: 'daily', createdAt: NOW, schemaVersion: 7, sessions: 1234, bytes: 3 * 1024 * 1024 });
  assert.deepEqual(f, { kind: 'Daily', when: formatDateTime(NOW), schema: '7', chats: '1,234', size: '3.0 MiB' });
  assert.equal(copyFacts({}).when, '—');
  assert.equal(restoreQuestion({ createdAt: NOW, sessions: 1 }),
    `Put back the copy made ${formatDateTime(NOW)} (1 chat)? Your current chats are kept as a copy first, so you can undo this.`);
  assert.match(restoreQuestion({ createdAt: NOW, sessions: 12 }), /\(12 chats\)/);
  assert.deepEqual(newestFirst([{ id: 'a', createdAt: 1 }, null, { id: 'b', createdAt: 3 }, { createdAt: 9 }, { id: 'c', createdAt: 2 }]).map((c) => c.id), ['b', 'c', 'a']);

  assert.deepEqual(lastText(null), { text: 'No daily copy yet: the first is made while the browser runs.', kind: '', reason: '' });
  assert.equal(lastText({ outcome: 'made', at: NOW }).text, `Last daily copy: ${formatDateTime(NOW)}.`);
  assert.deepEqual(lastText({ outcome: 'skipped', at: NOW, message: 'less than 1 GiB free' }),
    { text: `The daily copy of ${formatDateTime(NOW)} was skipped:`, kind: 'warn', reason: 'less than 1 GiB free' });
  assert.equal(lastText({ outcome: 'failed', at: NOW, message: 'disk I/O error' }).kind, 'error');
  assert.match(lastText({ outcome: 'running', at: NOW }).text, /being made/);
  assert.equal(lastText({ outcome: 'made', at: NOW }, { enabled: false }).text, 'Daily copies are off. A copy is still made before every upgrade.');
});

test('the form: defaults, ranges, the map written; a host refusal names its field', () => {
  assert.deepEqual(backupSettings({}), { backupsEnabled: true, backupFolder: '', backupDaily: 7, backupWeekly: 4 });
  assert.deepEqual(backupSettings({ backupsEnabled: false, backupFolder: '/b', backupDaily: 3, backupWeekly: 'x' }), { backupsEnabled: false, backupFolder: '/b', backupDaily: 3, backupWeekly: 4 });
  assert.deepEqual(readBackupForm({ enabled: true, folder: '  /mnt/usb/keepsake ', daily: '', weekly: '' }),
    { ok: true, map: { backupsEnabled: true, backupFolder: '/mnt/usb/keepsake', backupDaily: 7, backupWeekly: 4 } });
  assert.deepEqual(readBackupForm({ enabled: false, folder: '', daily: '365', weekly: '0' }).map, { backupsEnabled: false, backupFolder: '', backupDaily: 365, backupWeekly: 0 });
  const bad = readBackupForm({ enabled: true, folder: '', daily: '0', weekly: '53' });
  assert.deepEqual(bad, { ok: false, errors: { backupDaily: 'Enter a whole number from 1 to 365.', backupWeekly: 'Enter a whole number from 0 to 52.' } });
  assert.equal(readBackupForm({ daily: '2.5', weekly: '1' }).errors.backupDaily, 'Enter a whole number (0 or more, no decimals).');
  assert.equal(fieldOfError({ message: 'backupFolder must be an absolute path' }), 'backupFolder');
  assert.equal(fieldOfError({ message: 'backupsEnabled must be a boolean' }), 'backupsEnabled');
  assert.equal(fieldOfError({ message: 'something else' }), '');
});

test('the list: newest first with kind, local time, schema, chats and size; the last daily outcome; the folder', async () => {
  const { el, host } = await mount({ last: { day: '2027-01-15', outcome: 'skipped', at: NOW - 3600e3, message: 'only 200 MiB free on /home' } });
  const r = rows(el);
  assert.deepEqual(r.map((x) => x.kind), ['Daily', 'Weekly', 'Before an upgrade']);
  assert.deepEqual(r.map((x) => x.chats), ['2', '1', '0']);
  assert.deepEqual(r.map((x) => x.schema), ['7', '7', '5']);
  assert.equal(r[0].time, formatDateTime(NOW - DAY));
  assert.equal(r[0].size, '12 KiB');
  assert.equal(r[0].id, host.state.copies[0].id);
  assert.equal(byTestId(el, 'backup-where').textContent, '/home/u/.local/share/keepsake/backups');
  assert.equal(byTestId(el, 'backup-where').getAttribute('translate'), 'no', 'a path is not the UI\'s words');
  assert.equal(byTestId(el, 'backup-last-text').textContent, `The daily copy of ${formatDateTime(NOW - 3600e3)} was skipped:`);
  assert.equal(byTestId(el, 'backup-last-reason').textContent, 'only 200 MiB free on /home');
  assert.equal(byTestId(el, 'backup-last-reason').getAttribute('translate'), 'no', 'the host\'s words are data');
  assert.equal(byTestId(el, 'backup-last').dataset.kind, 'warn');
  assert.equal(byTestId(el, 'backup-undo-row').hidden, true, 'no Undo before a restore');
  assert.deepEqual(allByTestId(el, 'backup-restore').map((b) => b.getAttribute('aria-label')), r.map((x) => `Restore the copy made ${x.time}`));
  assert.equal(el.querySelectorAll('th').length, 6, 'column headers');
});

test('Restore asks once, naming the time and chats and that the current chats are kept; Cancel and Escape write nothing', async () => {
  const { el, host } = await mount();
  const before = host.ops().length;
  const button = allByTestId(el, 'backup-restore')[0];
  button.click();
  const text = byTestId(el, 'confirm-text').textContent;
  assert.equal(text, `Put back the copy made ${formatDateTime(NOW - DAY)} (2 chats)? Your current chats are kept as a copy first, so you can undo this.`);
  assert.equal(document.activeElement, byTestId(el, 'confirm-no'), 'Cancel has the focus');
  assert.equal(byTestId(el, 'confirm').getAttribute('role'), 'alertdialog');
  byTestId(el, 'confirm-no').click();
  assert.equal(byTestId(el, 'confirm'), null);
  assert.equal(document.activeElement, button, 'the focus goes back to Restore');
  button.click();
  fire(byTestId(el, 'confirm'), 'keydown', { key: 'Escape' });
  assert.equal(byTestId(el, 'confirm'), null);
  // a second Restore replaces an open question, never stacks them
  allByTestId(el, 'backup-restore')[1].click();
  allByTestId(el, 'backup-restore')[0].click();
  assert.equal(allByTestId(el, 'confirm').length, 1);
  byTestId(el, 'confirm-no').click();
  await settle();
  assert.deepEqual(host.ops().slice(before), [], 'nothing was asked of the host');
  assert.deepEqual(host.state.chats, ['Today 1', 'Today 2', 'Today 3']);
});

test('a restore: progress while it runs (buttons wait), the result, Undo restore from backups.list, and Undo brings the chats back', async () => {
  const { el, host, restored } = await mount();
  const yesterday = host.state.copies[0];
  host.hold('backups.restore');
  allByTestId(el, 'backup-restore')[0].click();
  byTestId(el, 'confirm-yes').click();
  await settle();
  assert.equal(byTestId(el, 'backup-progress').hidden, false, 'a spinner while it runs');
  assert.equal(el.getAttribute('aria-busy'), 'true');
  assert.equal(byTestId(el, 'backup-result').textContent, `Putting back the copy made ${formatDateTime(NOW - DAY)}… Your current chats are kept as a copy first.`);
  assert.ok(allByTestId(el, 'backup-restore').every((b) => b.disabled), 'no second restore meanwhile');
  assert.equal(byTestId(el, 'backup-now').disabled, true);
  host.release();
  await settle();
  assert.deepEqual(host.calls.filter((c) => c.op === 'backups.restore').map((c) => c.args), [{ id: yesterday.id }]);
  assert.deepEqual(host.state.chats, ['Yesterday 1', 'Yesterday 2']);
  assert.equal(byTestId(el, 'backup-progress').hidden, true);
  assert.equal(byTestId(el, 'backup-result').dataset.kind, 'ok');
  assert.equal(byTestId(el, 'backup-result').textContent,
    `Put back the copy made ${formatDateTime(NOW - DAY)}: 2 chats.The chats from before are kept as a copy: Undo restore brings them back.`);
  assert.deepEqual(restored, [true], 'the page is told, to reload its other sections');
  // the list now holds the copy made first, and backups.list's undo shows the button
  assert.equal(rows(el)[0].kind, 'Before a restore');
  assert.equal(rows(el)[0].chats, '3');
  assert.equal(byTestId(el, 'backup-undo-row').hidden, false);
  assert.equal(byTestId(el, 'backup-undo-hint').textContent, `Brings back the chats as they were at ${formatDateTime(NOW)}, before the last restore.`);
  assert.equal(document.activeElement, byTestId(el, 'backup-undo'), 'the focus is on Undo restore');

  byTestId(el, 'backup-undo').click();
  await settle();
  assert.deepEqual(host.state.chats, ['Today 1', 'Today 2', 'Today 3'], 'today\'s chats are back');
  assert.equal(byTestId(el, 'backup-result').textContent, `Restore undone: the chats are back as they were at ${formatDateTime(NOW)}.`);
  assert.equal(restored.length, 2);
  const restores = host.calls.filter((c) => c.op === 'backups.restore').map((c) => c.args.id);
  assert.equal(restores.length, 2);
  assert.match(restores[1], /prerestore/, 'undo restores the copy the restore made');
});

test('Undo restore goes away once anything is written (backups.list says so)', async () => {
  const { el, host, section } = await mount();
  allByTestId(el, 'backup-restore')[0].click();
  byTestId(el, 'confirm-yes').click();
  await settle();
  assert.equal(byTestId(el, 'backup-undo-row').hidden, false);
  await host.storage.settings.set({ map: { systemPrompt: 'x' } }); // e.g. a chat written in the panel
  await section.refresh(); // what a `changed` event leads to (options.js: refreshSoon)
  assert.equal(byTestId(el, 'backup-undo-row').hidden, true);
});

test('a failed restore says so and changes nothing here', async () => {
  const { el, host } = await mount();
  host.failNext('backups.restore', host.hostError('disk_full', 'no space for the copy before the restore'));
  allByTestId(el, 'backup-restore')[0].click();
  byTestId(el, 'confirm-yes').click();
  await settle();
  assert.equal(byTestId(el, 'backup-result').dataset.kind, 'error');
  assert.equal(byTestId(el, 'backup-result').textContent, 'The restore did not finish: explained disk_full: no space for the copy before the restore');
  assert.deepEqual(host.state.chats, ['Today 1', 'Today 2', 'Today 3']);
  assert.equal(byTestId(el, 'backup-undo-row').hidden, true);
  assert.equal(allByTestId(el, 'backup-restore').some((b) => b.disabled), false, 'the buttons work again');
});

test('Back up now: progress, the copy made, listed first', async () => {
  const { el, host } = await mount();
  host.hold('backups.create');
  byTestId(el, 'backup-now').click();
  await settle();
  assert.equal(byTestId(el, 'backup-result').textContent, 'Making a copy of the database…');
  assert.equal(byTestId(el, 'backup-now').disabled, true);
  host.release();
  await settle();
  assert.equal(byTestId(el, 'backup-result').textContent, `Copy made: ${formatDateTime(NOW)}, 3 chats, 16 KiB.`);
  assert.equal(rows(el)[0].kind, 'Made by you');
  assert.equal(byTestId(el, 'backup-now').disabled, false);
  host.failNext('backups.create', host.hostError('disk_full', 'not enough space'));
  byTestId(el, 'backup-now').click();
  await settle();
  assert.equal(byTestId(el, 'backup-result').textContent, 'No copy was made: explained disk_full: not enough space');
});

test('settings: shown from the host, checked here, written as the four keys; the host\'s refusal is shown by its field', async () => {
  const { el, host } = await mount({ settings: { backupsEnabled: false, backupDaily: 10 } });
  assert.equal(byTestId(el, 'backup-enabled').checked, false);
  assert.equal(byTestId(el, 'backup-daily').value, '10');
  assert.equal(byTestId(el, 'backup-weekly').value, '4');
  assert.equal(byTestId(el, 'backup-folder').value, '');
  assert.equal(byTestId(el, 'backup-last-text').textContent, 'Daily copies are off. A copy is still made before every upgrade.');
  const save = () => { byTestId(el, 'backup-save').click(); return settle(); };
  // checked here first
  byTestId(el, 'backup-daily').value = '0';
  fire(byTestId(el, 'backup-daily'), 'input');
  await save();
  const err = (f) => el.querySelector(`[data-field="${f}"]`).textContent;
  assert.equal(err('backupDaily'), 'Enter a whole number from 1 to 365.');
  assert.equal(byTestId(el, 'backup-daily').getAttribute('aria-invalid'), 'true');
  assert.equal(document.activeElement, byTestId(el, 'backup-daily'));
  assert.equal(host.ops().includes('settings.set'), false);
  // the folder is the host's to check: its refusal goes under the folder field
  byTestId(el, 'backup-daily').value = '14';
  byTestId(el, 'backup-folder').value = 'relative/path';
  await save();
  assert.equal(err('backupDaily'), '');
  assert.equal(err('backupFolder'), 'explained bad_request: backupFolder must be an absolute path or empty');
  assert.equal(document.activeElement, byTestId(el, 'backup-folder'));
  assert.equal(byTestId(el, 'backup-settings-status').textContent, 'Not saved: nothing was changed.');
  assert.deepEqual(host.state.settings, { backupsEnabled: false, backupDaily: 10 }, 'nothing written');
  // a good folder: all four written in one call
  byTestId(el, 'backup-folder').value = '/mnt/usb/keepsake';
  byTestId(el, 'backup-enabled').checked = true;
  await save();
  assert.equal(err('backupFolder'), '');
  assert.equal(byTestId(el, 'backup-settings-status').textContent, 'Saved.');
  assert.deepEqual(host.calls.filter((c) => c.op === 'settings.set').at(-1).args, { map: { backupsEnabled: true, backupFolder: '/mnt/usb/keepsake', backupDaily: 14, backupWeekly: 4 } });
  assert.equal(byTestId(el, 'backup-last-text').textContent, 'No daily copy yet: the first is made while the browser runs.', 'the list is read again');
});

test('unsaved edits survive a reload of the settings (a `changed` event); saved ones follow the host', async () => {
  const { el, host, section } = await mount({ settings: { backupDaily: 10 } });
  host.state.settings.backupDaily = 20;
  await section.reloadSettings();
  assert.equal(byTestId(el, 'backup-daily').value, '20');
  byTestId(el, 'backup-weekly').value = '9';
  fire(byTestId(el, 'backup-weekly'), 'input');
  host.state.settings.backupDaily = 30;
  await section.reloadSettings();
  assert.equal(byTestId(el, 'backup-weekly').value, '9', 'what is being typed stays');
});

test('a host without the backup operations: the list says why, the rest of the page is untouched', async () => {
  const host = fakeBackups();
  host.failNext('backups.list', host.hostError('unknown_op', 'unknown operation backups.list'));
  const el = document.createElement('div');
  document.body.append(el);
  const section = createBackups({ el, storage: host.storage, explain: (e) => `explained ${e.code}`, timers: manualTimers() });
  await section.load();
  assert.equal(byTestId(el, 'backup-list-status').textContent, 'Could not list the copies: explained unknown_op');
  assert.equal(byTestId(el, 'backup-list-status').dataset.kind, 'error');
  assert.equal(allByTestId(el, 'backup-row').length, 0);
});

test('the list is read again on its own: soon while the day\'s copy is due, then every minute', async () => {
  const { el, host, timers } = await mount({ copies: [] });
  assert.equal(allByTestId(el, 'backup-row').length, 0);
  assert.equal(byTestId(el, 'backup-none').textContent, 'No copies yet.');
  assert.deepEqual(timers.delays(), [LIST_SOON_MS], 'no outcome yet: a copy is due, look again soon');
  // the host makes the day's copy on its own thread, with no event
  host.state.copies.push({ id: 'keepsake-daily-x', kind: 'daily', createdAt: NOW, schemaVersion: 7, sessions: 3, bytes: 8192, snapshot: [] });
  host.state.last = { day: '2027-01-15', outcome: 'made', at: NOW, id: 'keepsake-daily-x' };
  timers.fire();
  await settle();
  assert.deepEqual(rows(el).map((r) => r.kind), ['Daily']);
  assert.equal(byTestId(el, 'backup-last-text').textContent, `Last daily copy: ${formatDateTime(NOW)}.`);
  assert.deepEqual(timers.delays(), [LIST_POLL_MS], 'then once a minute');
  const reads = host.ops().filter((o) => o === 'backups.list').length;
  timers.fire();
  await settle();
  assert.equal(host.ops().filter((o) => o === 'backups.list').length, reads + 1);
  assert.equal(timers.delays().length, 1, 'one timer at a time');
});
