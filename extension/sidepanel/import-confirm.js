// Imports never take settings silently (docs/keeps.md "Imports"): the drawer's Import and the
// options page's "Import browser data" first ask the host what the document holds
// (storage.importPreview, secrets masked), and when it carries settings the person chooses
// "Import chats only" (settings: "none") or "Import chats and these settings" ("keep": the ones
// this computer lacks; "overwrite" replaces too, offered only when some differ). Shared by the
// side panel and the options page.

import { h } from './dom.js';
import { previewSettings, previewSummary } from './keeps.js';

/**
 * Preview, ask when the document carries settings, then import.
 * `ask(preview)` → Promise<'none' | 'keep' | 'overwrite' | null> (null: cancelled). A document
 * without settings is imported with `settings: "none"` without asking.
 * → `{result, choice, preview}` or `{cancelled: true, preview}`.
 */
export async function importWithPreview({ storage, doc, ask }) {
  const preview = await storage.storage.importPreview({ document: doc });
  let choice = 'none';
  if (previewSettings(preview).length > 0) {
    choice = await ask(preview);
    if (choice !== 'none' && choice !== 'keep' && choice !== 'overwrite') return { cancelled: true, preview };
  }
  const result = await storage.storage.import({ document: doc, settings: choice });
  return { result, choice, preview };
}

/**
 * The question, as a box inserted into `container` (before `before`): what the file holds, its
 * settings (key, masked value, what importing it would do) and the choices. Resolves with the
 * choice (null for Cancel or Escape) and removes itself.
 */
export function askImportSettings({ container, before = null, preview, fileName = '' }) {
  return new Promise((resolve) => {
    const rows = previewSettings(preview);
    const differ = rows.some((r) => r.current === 'different');
    const invalid = Math.max(0, Math.trunc(Number(preview?.settingsInvalid) || 0));
    const done = (choice) => {
      box.remove();
      resolve(choice);
    };
    const button = (text, testid, choice, cls = 'btn btn-small') =>
      h('button', { type: 'button', class: cls, testid, text, on: { click: () => done(choice) } });
    const chatsOnly = button('Import chats only', 'import-chats-only', 'none', 'btn btn-small btn-primary');
    const box = h('div', {
      class: 'confirm import-confirm', role: 'alertdialog', testid: 'import-confirm',
      'aria-label': 'Import settings too?',
      on: { keydown: (e) => { if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); done(null); } } },
    },
    h('span', { text: `${fileName ? `${fileName}: ` : ''}${previewSummary(preview)}` }),
    h('span', { text: `It also carries ${rows.length === 1 ? 'a setting' : `${rows.length} settings`}. Nothing changes unless you choose:` }),
    h('ul', { class: 'import-settings', testid: 'import-settings' },
      rows.map((r) => h('li', { testid: 'import-setting', dataset: { key: r.key, current: r.current } },
        h('code', { text: r.key }), ' ', h('span', { class: 'import-value', text: r.value }), ' ',
        h('em', { text: `(${r.change})` })))),
    invalid ? h('span', { text: `${invalid} more ${invalid === 1 ? 'setting is' : 'settings are'} not valid and will be skipped.` }) : null,
    h('div', { class: 'confirm-actions' },
      button('Cancel', 'import-cancel', null),
      chatsOnly,
      button(differ ? 'Import chats and the new settings' : 'Import chats and these settings', 'import-with-settings', 'keep'),
      differ ? button('Import chats and replace my settings', 'import-replace-settings', 'overwrite', 'btn btn-small btn-danger-outline') : null));
    container.insertBefore(box, before);
    chatsOnly.focus();
  });
}
