// Options → Sync (issue 31): where this computer stands with the others that share its sync folder,
// Pause / Resume, and how to set sync up. The setting up itself is the terminal's
// (`keepsake-host sync init|join`, docs/sync.md); this section reads `sync.status` and writes only
// `sync.pause` / `sync.resume` (PROTOCOL.md "sync").
//
//   - this device: its name and id, the folder, where its sync key is kept, when it last looked at
//     the folder, Syncing or Paused, and its changes not in the folder yet;
//   - every other device seen in the folder: its name and id, the operations applied from it, its
//     files seen but not applied yet, when one was last applied;
//   - problems in plain words (the folder unreachable, the key unusable, a damaged file, a file
//     sealed with another key, pictures not arrived), what they name and the host's own reason as
//     data (translate="no"), and the commands that are the way out;
//   - the commands that set it up, each with a Copy button.
// Read again on every `changed` event (an apply of another device's operations is a write), when
// the page becomes visible, and every SYNC_POLL_MS while it is shown (a file arriving in the folder
// changes what waits and the problems without a write). No DOM string parsing anywhere.

import { t, formatDateTime, formatNumber } from '../lib/i18n.js';
import { h, replaceChildren, debounce, copyText, iconButton } from '../lib/ui/dom.js';

/** The status is read again this often while the page is shown. */
export const SYNC_POLL_MS = 5_000;

/** Problem kinds this page words itself (`sync.status` `problems[].kind`); others show the host's sentence. */
export const PROBLEM_KINDS = Object.freeze(['folder', 'key', 'damaged', 'foreign', 'pictures']);

const count = (v) => Math.max(0, Math.trunc(Number(v) || 0));
const str = (v) => (typeof v === 'string' ? v : '');
const timeOrNull = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/**
 * `sync.status` (PROTOCOL.md "sync") as this page shows it: `{setUp, paused, folder,
 * folderReachable, device, outboxPending, looked, lastLookAt, key, devices, problems}`; `devices`
 * are the OTHER devices (`self` left out), `applied` their operations applied (`opsApplied`),
 * `pending` their files seen and not applied yet (segments), `waitingPictures`.
 */
export function readStatus(r) {
  const s = r && typeof r === 'object' ? r : {};
  const dev = s.device && typeof s.device === 'object' ? s.device : null;
  const device = dev && str(dev.id) ? { id: dev.id, name: str(dev.name), createdAt: timeOrNull(dev.createdAt) } : null;
  const setUp = s.setUp === true && !!device;
  const key = s.key && typeof s.key === 'object' ? s.key : null;
  return {
    setUp,
    paused: dev?.paused === true,
    folder: str(s.folder?.path) || str(dev?.folder),
    folderReachable: s.folder?.reachable !== false,
    device,
    outboxPending: count(s.outbox),
    looked: s.running === true && timeOrNull(s.lastLookAt) !== null,
    lastLookAt: timeOrNull(s.lastLookAt),
    key: key ? { kept: str(key.kept), secretStore: str(key.secretStore), reachable: key.reachable !== false, reason: str(key.reason), ok: key.ok !== false } : null,
    devices: (Array.isArray(s.devices) ? s.devices : [])
      .filter((d) => d && typeof d === 'object' && str(d.id) && d.self !== true && d.id !== device?.id)
      .map((d) => ({
        id: d.id, name: str(d.name), applied: count(d.opsApplied), pending: count(d.pending),
        waitingPictures: count(d.waitingPictures), lastAppliedAt: timeOrNull(d.lastAppliedAt),
      })),
    problems: (Array.isArray(s.problems) ? s.problems : []).filter((p) => p && typeof p === 'object'),
  };
}

/** A device's name as shown: its own, else the start of its id. */
export function deviceLabel(d) {
  return str(d?.name).trim() || str(d?.id).slice(0, 8) || '—';
}

/**
 * The folder in the commands: a `Keepsake` folder in Syncthing's default folder, `Sync` in the home
 * folder (docs/sync.md's example). PowerShell's `$HOME` on Windows, where `~` reaches no program.
 */
export function exampleFolder(os) {
  return os === 'win' ? '$HOME\\Sync\\Keepsake' : '~/Sync/Keepsake';
}

/** The commands that set sync up, show it and stop it, copied as they are (nothing else in them). */
export function setupCommands(os) {
  const folder = exampleFolder(os);
  return {
    init: `keepsake-host sync init --folder ${folder}`, // i18n-ok: a command, typed as it is
    join: `keepsake-host sync join --folder ${folder} --key KEY`, // i18n-ok: a command, typed as it is
    status: 'keepsake-host sync status', // i18n-ok: a command, typed as it is
    leave: 'keepsake-host sync leave', // i18n-ok: a command, typed as it is
  };
}

/**
 * One problem in plain words: `{text, data, detail, commands}` — `data` is what the problem names
 * (a file, the folder), `detail` the host's own sentence where it says more than the words here
 * (why the folder or the key cannot be used; the whole of a kind this page does not know), both
 * shown as data; `commands` the ones to run when that is the way out.
 * @param {object} p a `problems[]` item `{kind, device?, file?, detail}`
 * @param {{devices?: object[], folder?: string, os?: string}} [ctx]
 */
export function problemText(p, { devices = [], folder = '', os = '' } = {}) {
  const from = devices.find((x) => x.id === p.device);
  const who = () => (from ? deviceLabel(from) : str(p.device).slice(0, 8) || t('optSyncAnotherDevice'));
  const file = str(p.file);
  const detail = str(p.detail);
  const cmds = setupCommands(os);
  switch (p.kind) {
    case 'folder':
      return { text: t('optSyncProblemFolder'), data: folder, detail, commands: [] };
    case 'key':
      return { text: t('optSyncProblemKey'), data: '', detail, commands: [cmds.leave, cmds.join] };
    case 'damaged':
      return { text: t('optSyncProblemDamaged', who()), data: file, detail: '', commands: [] };
    case 'foreign':
      return { text: t('optSyncProblemForeign'), data: file, detail: '', commands: [] };
    case 'pictures': {
      const n = from?.waitingPictures ?? 0;
      const text = n === 1 ? t('optSyncProblemPicturesOne', who())
        : n > 1 ? t('optSyncProblemPicturesMany', formatNumber(n), who()) : t('optSyncProblemPictures', who());
      return { text, data: '', detail: '', commands: [] };
    }
    default:
      return { text: t('optSyncProblemOther'), data: '', detail: detail || str(p.kind), commands: [] };
  }
}

/** Where this computer keeps the sync key, in words: `{text, reason}` (`reason`: the host's, as data). */
export function keyText(key) {
  if (!key) return { text: '—', reason: '' };
  if (key.kept === 'secretStore') return { text: t('optSyncKeyInStore', key.secretStore || t('optSyncSecretStore')), reason: '' };
  if (key.kept === 'databaseFile') return { text: t('optSyncKeyInFile'), reason: key.reachable ? '' : key.reason };
  return { text: '—', reason: '' };
}

/** "3 changes made here are being written to the sync folder" (while paused: "…wait"), or ''. */
export function outboxText(n, paused) {
  if (!n) return '';
  if (paused) return n === 1 ? t('optSyncOutboxPausedOne') : t('optSyncOutboxPausedMany', formatNumber(n));
  return n === 1 ? t('optSyncOutboxOne') : t('optSyncOutboxMany', formatNumber(n));
}

/** A time in the UI language, or '—'. */
function when(ms) {
  return ms === null ? '—' : formatDateTime(ms);
}

/** Data inside the UI's words: a name, an id, a path, the host's sentence (the i18n check skips it). */
function data(tag, props, text) {
  return h(tag, { translate: 'no', ...props, text });
}

/**
 * Build the section's contents into `el` and wire them.
 * @param {object} o
 * @param {Element} o.el        the container (options.html `#sync-body`)
 * @param {object} o.storage    createStorage(...) client (sync.status, sync.pause, sync.resume)
 * @param {(err: any) => string} o.explain  one line about an error (the page's explainLine)
 * @param {Promise<string>|string} [o.os]  lib/platform.js operatingSystem(), for the commands' folder
 * @param {{setTimeout: Function, clearTimeout: Function}} [o.timers]  for the re-reads (tests)
 * @returns {{load: () => Promise<void>, refresh: () => Promise<void>, refreshSoon: () => void}}
 */
export function createSync({
  el, storage, explain, os = '',
  timers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (id) => clearTimeout(id) },
}) {
  let osName = typeof os === 'string' ? os : '';
  const osReady = Promise.resolve(os).then((v) => { osName = typeof v === 'string' ? v : ''; }, () => {});

  const state = h('div', { class: 'status sync-state', testid: 'sync-state', role: 'status' });
  const toggle = h('button', { type: 'button', class: 'btn', testid: 'sync-toggle' });
  toggle.hidden = true;
  const toggleResult = h('span', { class: 'status', testid: 'sync-toggle-result', role: 'status' });
  const head = h('div', { class: 'inline sync-head' }, state, toggle, toggleResult);

  const facts = h('dl', { class: 'facts', testid: 'sync-facts' });
  const outbox = h('p', { class: 'hint', testid: 'sync-outbox' });
  const devicesHead = h('h3', { text: t('optSyncDevicesHeading') });
  const devices = h('table', { class: 'backups sync-devices', testid: 'sync-devices' });
  const problemsHead = h('h3', { text: t('optSyncProblemsHeading') });
  const problems = h('ul', { class: 'sync-problems', testid: 'sync-problems' });
  const readStatusLine = h('div', { class: 'status', testid: 'sync-read-status', role: 'status' });
  const known = h('div', { testid: 'sync-known' }, facts, outbox, devicesHead, devices, problemsHead, problems);
  known.hidden = true;

  const setupHead = h('h3', { testid: 'sync-setup-heading' });
  const setup = h('div', { class: 'sync-setup', testid: 'sync-setup' });

  replaceChildren(el, head, readStatusLine, known, setupHead, setup);

  let current = null;
  let busy = false;

  /** A command in a `<code>` with its Copy button; `label` says where to run it. */
  function command(label, text, testid) {
    const copied = h('span', { class: 'status', role: 'status' });
    // the button says which command it copies: "Copy command" and then the command itself
    return h('div', { class: 'sync-command', testid },
      h('div', { class: 'hint', text: label }),
      h('div', { class: 'banner-fix' },
        data('code', { testid: `${testid}-text`, id: `${testid}-text` }, text),
        iconButton('copy', t('uiCopyCommand'), {
          testid: `${testid}-copy`,
          'aria-describedby': `${testid}-text`,
          on: {
            click: async () => {
              const ok = await copyText(text);
              copied.textContent = ok ? t('panelCopied') : '';
            },
          },
        }),
        copied));
  }

  function renderSetup(s) {
    const cmds = setupCommands(osName);
    setupHead.textContent = s.setUp ? t('optSyncAddHeading') : t('optSyncSetupHeading');
    replaceChildren(setup,
      h('p', { class: 'hint', testid: 'sync-how', text: t('optSyncHowFolder') }),
      h('p', { class: 'hint', testid: 'sync-how-pair', text: s.setUp ? t('optSyncHowPairMore') : t('optSyncHowPair') }),
      s.setUp ? null : command(t('optSyncInitLabel'), cmds.init, 'sync-cmd-init'),
      command(s.setUp ? t('optSyncJoinMoreLabel') : t('optSyncJoinLabel'), cmds.join, 'sync-cmd-join'),
      command(t('optSyncStatusLabel'), cmds.status, 'sync-cmd-status'),
      s.setUp ? command(t('optSyncLeaveLabel'), cmds.leave, 'sync-cmd-leave') : null);
  }

  function renderFacts(s) {
    const row = (label, value, testid) => [h('dt', { text: label }), h('dd', { testid }, value)];
    const key = keyText(s.key);
    replaceChildren(facts,
      row(t('optSyncThisDevice'), [data('span', { testid: 'sync-device-name', class: 'sync-name' }, deviceLabel(s.device)), ' ', data('span', { class: 'mono sync-id', testid: 'sync-device-id' }, s.device?.id ?? '')], 'sync-device'),
      row(t('optSyncFolder'), data('span', { class: 'mono', testid: 'sync-folder-path' }, s.folder || '—'), 'sync-folder'),
      row(t('optSyncKey'), [h('span', { testid: 'sync-key-text', text: key.text }), key.reason ? [' ', data('span', { testid: 'sync-key-reason' }, key.reason)] : null], 'sync-key'),
      row(t('optSyncLastLook'), s.lastLookAt === null ? t('optSyncNotLookedYet') : when(s.lastLookAt), 'sync-last-look'));
    outbox.textContent = outboxText(s.outboxPending, s.paused);
    outbox.hidden = !outbox.textContent;
  }

  function renderDevices(s) {
    if (s.devices.length === 0) {
      // before this computer's first look at the folder, no device is known yet: not "none"
      const none = s.looked ? t('optSyncNoDevices') : t('optSyncDevicesNotLooked');
      replaceChildren(devices, h('tbody', {}, h('tr', {}, h('td', { class: 'backups-empty', testid: 'sync-devices-none', text: none }))));
      return;
    }
    const headRow = h('thead', {}, h('tr', {},
      h('th', { scope: 'col', text: t('optSyncColDevice') }),
      h('th', { scope: 'col', class: 'num', text: t('optSyncColApplied') }),
      h('th', { scope: 'col', class: 'num', text: t('optSyncColPending') }),
      h('th', { scope: 'col', text: t('optSyncColLast') })));
    const body = h('tbody', {}, s.devices.map((d) => h('tr', { testid: 'sync-device-row', dataset: { id: d.id } },
      h('th', { scope: 'row', class: 'sync-device-th' }, h('div', { class: 'sync-device-cell' },
        data('span', { class: 'sync-name', testid: 'sync-device-row-name' }, deviceLabel(d)),
        data('span', { class: 'mono sync-id', testid: 'sync-device-row-id' }, d.id))),
      h('td', { class: 'num', testid: 'sync-applied', text: formatNumber(d.applied) }),
      h('td', { class: 'num', testid: 'sync-pending', text: formatNumber(d.pending) }),
      h('td', { testid: 'sync-last', text: when(d.lastAppliedAt) }))));
    replaceChildren(devices, headRow, body);
  }

  function renderProblems(s) {
    if (s.problems.length === 0) {
      replaceChildren(problems, h('li', { class: 'sync-ok', testid: 'sync-problems-none', text: t('optSyncNoProblems') }));
      return;
    }
    replaceChildren(problems, s.problems.map((p) => {
      const x = problemText(p, { devices: s.devices, folder: s.folder, os: osName });
      return h('li', { testid: 'sync-problem', dataset: { kind: str(p.kind) } },
        h('span', { testid: 'sync-problem-text', text: x.text }),
        x.data ? [' ', data('span', { class: 'mono', testid: 'sync-problem-data' }, x.data)] : null,
        x.detail ? data('div', { class: 'hint', testid: 'sync-problem-detail' }, x.detail) : null,
        x.commands.map((c) => h('div', { class: 'banner-fix' }, data('code', { testid: 'sync-problem-command' }, c),
          iconButton('copy', t('uiCopyCommand'), { testid: 'sync-problem-copy', on: { click: () => copyText(c) } }))));
    }));
  }

  function renderState(s) {
    if (!s.setUp) {
      state.textContent = t('optSyncNotSetUp');
      state.dataset.kind = '';
    } else {
      state.textContent = s.paused ? t('optSyncPaused') : t('optSyncOn');
      state.dataset.kind = s.paused ? 'warn' : 'ok';
    }
    state.dataset.state = !s.setUp ? 'off' : s.paused ? 'paused' : 'on';
    toggle.hidden = !s.setUp;
    toggle.textContent = s.paused ? t('optSyncResume') : t('optSyncPause');
    toggle.dataset.action = s.paused ? 'resume' : 'pause';
    toggle.disabled = busy;
  }

  function render(s) {
    current = s;
    renderState(s);
    known.hidden = !s.setUp;
    if (s.setUp) {
      renderFacts(s);
      renderDevices(s);
      renderProblems(s);
    }
    renderSetup(s);
  }

  // ---- reading ---------------------------------------------------------------------------------
  let pollTimer = null;
  function schedule() {
    if (pollTimer !== null) timers.clearTimeout(pollTimer);
    pollTimer = timers.setTimeout(() => {
      pollTimer = null;
      if (busy || globalThis.document?.visibilityState === 'hidden') schedule();
      else refresh();
    }, SYNC_POLL_MS);
  }

  let readSeq = 0;
  async function refresh() {
    const my = ++readSeq;
    el.setAttribute('aria-busy', 'true');
    try {
      await osReady;
      const r = await storage.sync.status({});
      if (my !== readSeq) return;
      readStatusLine.textContent = '';
      delete readStatusLine.dataset.kind;
      render(readStatus(r));
    } catch (err) {
      if (my !== readSeq) return;
      readStatusLine.textContent = t('optSyncReadFailed', explain(err));
      readStatusLine.dataset.kind = 'error';
      if (!current) {
        state.textContent = '';
        renderSetup({ setUp: false });
      }
    } finally {
      if (my === readSeq) {
        el.removeAttribute('aria-busy');
        schedule();
      }
    }
  }
  const refreshSoon = debounce(() => { if (!busy) refresh(); }, 300);

  // ---- Pause / Resume --------------------------------------------------------------------------
  toggle.addEventListener('click', async () => {
    if (busy || !current?.setUp) return;
    const pausing = !current.paused;
    busy = true;
    toggle.disabled = true;
    toggle.setAttribute('aria-busy', 'true');
    toggleResult.textContent = '';
    delete toggleResult.dataset.kind;
    try {
      // the reply is the sync.status object as it is now
      const r = await (pausing ? storage.sync.pause({}) : storage.sync.resume({}));
      if (r && typeof r === 'object' && r.setUp !== undefined) render(readStatus(r));
      toggleResult.textContent = pausing ? t('optSyncPausedNow') : t('optSyncResumedNow');
      toggleResult.dataset.kind = 'ok';
    } catch (err) {
      toggleResult.textContent = pausing ? t('optSyncPauseFailed', explain(err)) : t('optSyncResumeFailed', explain(err));
      toggleResult.dataset.kind = 'error';
    } finally {
      busy = false;
      toggle.removeAttribute('aria-busy');
      await refresh();
      toggle.focus();
    }
  });

  return {
    async load() { await refresh(); },
    refresh,
    refreshSoon,
  };
}
