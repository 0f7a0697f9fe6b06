// Imports never take settings silently (docs/keeps.md "Imports"): the drawer's Import and the
// options page's "Import browser data" first ask the host what the document holds
// (storage.importPreview, secrets masked), and when it carries settings the person chooses
// "Import chats only" (settings: "none") or "Import chats and these settings" ("keep": the ones
// this computer lacks; "overwrite" replaces too, offered only when some differ). Shared by the
// side panel and the options page.

import { h } from './dom.js';
import { t, formatNumber } from '../i18n.js';
import { previewSettings, previewSummary } from './keeps.js';
import { splitImport, mergePreviews, mergeResults } from '../import-pieces.js';

/**
 * Preview, ask when the document carries settings, then import — in pieces when the document is
 * larger than one message (lib/import-pieces.js): every piece is previewed, the previews are
 * summed, and after one question the pieces are imported in order.
 * `ask(preview)` → Promise<'none' | 'keep' | 'overwrite' | null> (null: cancelled). A document
 * without settings is imported with `settings: "none"` without asking. `progress(done, total)` is
 * called before each piece when there is more than one.
 * → `{result, choice, preview, pieces}` or `{cancelled: true, preview}`. A session too large for
 * one message is never cut: it is named in the result's warnings (and `tooLarge`). A piece that
 * fails throws an error saying how many pieces were imported first and that importing the file
 * again finishes it (imports skip the sessions already there).
 */
export async function importWithPreview({ storage, doc, ask, progress = () => {} }) {
  const { pieces, tooLarge, warnings } = splitImport(doc);
  const previews = [];
  for (const piece of pieces) previews.push(await storage.storage.importPreview({ document: piece }));
  const preview = pieces.length === 1 ? previews[0] : mergePreviews(previews);
  const notes = [...warnings, ...tooLarge.map(tooLargeNote)];
  if (notes.length) preview.warnings = [...(preview.warnings || []), ...notes];
  let choice = 'none';
  if (previewSettings(preview).length > 0) {
    choice = await ask(preview);
    if (choice !== 'none' && choice !== 'keep' && choice !== 'overwrite') return { cancelled: true, preview };
  }
  const results = [];
  for (const [i, piece] of pieces.entries()) {
    if (pieces.length > 1) progress(i, pieces.length);
    try {
      results.push(await storage.storage.import({ document: piece, settings: choice }));
    } catch (err) {
      const done = mergeResults(results);
      const before = i === 1 ? t('uiPiecesOne', formatNumber(i)) : t('uiPiecesMany', formatNumber(i));
      const sessions = done.sessionsImported === 1 ? t('uiSessionsOne', formatNumber(1)) : t('uiSessionsMany', formatNumber(Number(done.sessionsImported) || 0));
      const e = new Error(t('uiImportPieceFailed', formatNumber(i + 1), formatNumber(pieces.length), err?.message || err, before, sessions));
      e.code = err?.code;
      e.cause = err;
      throw e;
    }
  }
  const result = pieces.length === 1 ? results[0] : mergeResults(results);
  if (notes.length) result.warnings = [...(result.warnings || []), ...notes];
  return { result, choice, preview, pieces: pieces.length, tooLarge };
}

function tooLargeNote(big) {
  const mib = formatNumber(big.bytes / (1024 * 1024), { minimumFractionDigits: 1, maximumFractionDigits: 1 });
  const what = big.id === null ? big.name : t('uiSessionNamed', JSON.stringify(big.name || big.id));
  return t('uiTooLargeNote', what, formatNumber(big.values), mib);
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
    const chatsOnly = button(t('uiImportChatsOnly'), 'import-chats-only', 'none', 'btn btn-small btn-primary');
    const box = h('div', {
      class: 'confirm import-confirm', role: 'alertdialog', testid: 'import-confirm',
      'aria-label': t('uiImportSettingsToo'),
      on: { keydown: (e) => { if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); done(null); } } },
    },
    h('span', { text: fileName ? t('uiLabelled', fileName, previewSummary(preview)) : previewSummary(preview) }),
    h('span', { text: rows.length === 1 ? t('uiImportCarriesOne') : t('uiImportCarriesMany', formatNumber(rows.length)) }),
    h('ul', { class: 'import-settings', testid: 'import-settings' },
      rows.map((r) => h('li', { testid: 'import-setting', dataset: { key: r.key, current: r.current } },
        h('code', { text: r.key }), ' ', h('span', { class: 'import-value', text: r.value }), ' ',
        h('em', { text: `(${r.change})` })))),
    invalid ? h('span', { text: invalid === 1 ? t('uiImportInvalidOne', formatNumber(invalid)) : t('uiImportInvalidMany', formatNumber(invalid)) }) : null,
    h('div', { class: 'confirm-actions' },
      button(t('uiCancel'), 'import-cancel', null),
      chatsOnly,
      button(differ ? t('uiImportWithNewSettings') : t('uiImportWithTheseSettings'), 'import-with-settings', 'keep'),
      differ ? button(t('uiImportReplaceSettings'), 'import-replace-settings', 'overwrite', 'btn btn-small btn-danger-outline') : null));
    container.insertBefore(box, before);
    chatsOnly.focus();
  });
}
