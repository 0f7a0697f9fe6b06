// Options → Sync (issue 31): where this computer stands with the others that share its sync folder,
// Pause / Resume, and how to set sync up. The setting up itself is the terminal's
// (`keepsake-host sync init|join`, docs/sync.md); this section reads `sync.status` and writes only
// `sync.pause` / `sync.resume`.
//
//   - this device: its name and id, the folder, Syncing or Paused, and this computer's changes not
//     in the folder yet;
//   - every other device seen in the folder: its name and id, the operations applied from it, those
//     seen but not applied yet, when one was last applied;
//   - problems in plain words (a damaged file, a file sealed with another key, pictures not arrived,
//     the wrong key, the folder missing), the file or folder they name as data (translate="no");
//   - the commands that set it up, each with a Copy button.
// Read again on every `changed` event (an apply of another device's operations is a write), when
// the page becomes visible, and every SYNC_POLL_MS while it is shown (a file arriving in the folder
// changes what is pending and the problems without a write). No DOM string parsing anywhere.

import { t, formatDateTime, formatNumber } from '../lib/i18n.js';
import { h, replaceChildren, debounce, copyText, iconButton } from '../lib/ui/dom.js';

/** The status is read again this often while the page is shown. */
export const SYNC_POLL_MS = 5_000;

/** Problem kinds this page words itself (`sync.status` `problems[].kind`); others show the host's sentence. */
export const PROBLEM_KINDS = Object.freeze(['damaged', 'foreign', 'pictures_pending', 'wrong_key', 'folder_missing']);

const count = (v) => Math.max(0, Math.trunc(Number(v) || 0));
const str = (v) => (typeof v === 'string' ? v : '');
const timeOrNull = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' && v && Number.isFinite(Date.parse(v)) ? Date.parse(v) : null);

/**
 * `sync.status` as this page uses it, whatever the host left out: `{setUp, paused, folder, device,
 * outboxPending, devices, problems}`.
 */
export function readStatus(r) {
  const s = r && typeof r === 'object' ? r : {};
  const dev = s.device && typeof s.device === 'object' ? s.device : null;
  const device = dev && str(dev.id) ? { id: dev.id, name: str(dev.name), createdAt: timeOrNull(dev.createdAt) } : null;
  return {
    setUp: s.setUp === true || (s.setUp === undefined && !!device),
    paused: s.paused === true,
    folder: str(s.folder),
    device,
    outboxPending: count(s.outbox?.pending),
    devices: (Array.isArray(s.devices) ? s.devices : [])
      .filter((d) => d && typeof d === 'object' && str(d.id) && d.id !== device?.id)
      .map((d) => ({ id: d.id, name: str(d.name), applied: count(d.applied), pending: count(d.pending), lastAppliedAt: timeOrNull(d.lastAppliedAt) })),
    problems: (Array.isArray(s.problems) ? s.problems : []).filter((p) => p && typeof p === 'object'),
  };
}

/** A device's name as shown: its own, else the start of its id. */
export function deviceLabel(d) {
  return str(d?.name).trim() || str(d?.id).slice(0, 8) || '—';
}

/**
 * The folder in the commands: Syncthing's default folder, `Sync` in the home folder (the host keeps
 * its files under `keepsake/` there). PowerShell's `$HOME` on Windows, where `~` reaches no program.
 */
export function exampleFolder(os) {
  return os === 'win' ? '$HOME\\Sync' : '~/Sync';
}

/** The commands that set sync up, stop it, and show it, copied as they are (nothing else in them). */
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
 * One problem in plain words: `{text, data, command?}` — `data` is what the problem names (a file,
 * the folder, or the host's own sentence for a kind this page does not know), shown as data;
 * `command` the one to run when that is the way out.
 * @param {object} p a `problems[]` item
 * @param {{devices?: {id: string, name: string}[], folder?: string, os?: string}} [ctx]
 */
export function problemText(p, { devices = [], folder = '', os = '' } = {}) {
  const who = () => {
    const d = devices.find((x) => x.id === p.device);
    return d ? deviceLabel(d) : str(p.deviceName) || str(p.device).slice(0, 8) || t('optSyncAnotherDevice');
  };
  const file = str(p.file);
  switch (p.kind) {
    case 'damaged':
      return { text: t('optSyncProblemDamaged', who()), data: file };
    case 'foreign':
      return { text: t('optSyncProblemForeign'), data: file };
    case 'pictures_pending': {
      const n = count(p.count);
      return { text: n === 1 ? t('optSyncProblemPicturesOne', who()) : t('optSyncProblemPicturesMany', formatNumber(n), who()), data: '' };
    }
    case 'wrong_key':
      return { text: t('optSyncProblemWrongKey'), data: '', command: setupCommands(os).join };
    case 'folder_missing':
      return { text: t('optSyncProblemFolderMissing'), data: str(p.folder) || folder };
    default:
      return { text: t('optSyncProblemOther'), data: str(p.message) || str(p.kind) };
  }
}

/** "3 changes made here are not in the folder yet" (while paused: "…wait for Resume"), or ''. */
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
    replaceChildren(facts,
      row(t('optSyncThisDevice'), [data('span', { testid: 'sync-device-name', class: 'sync-name' }, deviceLabel(s.device)), ' ', data('span', { class: 'mono sync-id', testid: 'sync-device-id' }, s.device?.id ?? '')], 'sync-device'),
      row(t('optSyncFolder'), data('span', { class: 'mono', testid: 'sync-folder-path' }, s.folder || '—'), 'sync-folder'));
    outbox.textContent = outboxText(s.outboxPending, s.paused);
    outbox.hidden = !outbox.textContent;
  }

  function renderDevices(s) {
    if (s.devices.length === 0) {
      replaceChildren(devices, h('tbody', {}, h('tr', {}, h('td', { class: 'backups-empty', testid: 'sync-devices-none', text: t('optSyncNoDevices') }))));
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
        x.command ? h('div', { class: 'banner-fix' }, data('code', { testid: 'sync-problem-command' }, x.command),
          iconButton('copy', t('uiCopyCommand'), { testid: 'sync-problem-copy', on: { click: () => copyText(x.command) } })) : null);
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
      await (pausing ? storage.sync.pause({}) : storage.sync.resume({}));
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
