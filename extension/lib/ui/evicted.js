// Eviction is never silent (docs/keeps.md "Eviction"): when a maxSessions cap moved chats to the
// trash — a new chat, a lower cap saved in Options — the page says which ones went and offers Undo
// (trash.restore of each). Shared by the side panel and the options page.

import { h, iconButton, replaceChildren } from './dom.js';
import { evictedText, namesOf, nameList } from './keeps.js';
import { t, formatNumber } from '../i18n.js';

/** Names of evicted ids, read from the trash (ids the trash no longer lists are left out). */
export async function evictedNames(storage, ids) {
  try {
    const t = await storage.trash.list();
    return namesOf(ids, t?.items);
  } catch {
    return [];
  }
}

/**
 * Restore every id (a missing one is skipped: already restored or purged).
 * → `{restored: [ids], failed: [{id, error}]}`.
 */
async function restoreAll(storage, ids) {
  const restored = [];
  const failed = [];
  for (const id of ids) {
    try {
      await storage.trash.restore({ id });
      restored.push(id);
    } catch (error) {
      if (error?.code === 'not_found') continue;
      failed.push({ id, error });
    }
  }
  return { restored, failed };
}

/**
 * A notice element: "N older chats moved to Recently deleted: “a”, “b”" with Undo
 * (data-testid `evicted-undo`). `onRestored(ids)` runs after Undo; `explain(err)` → one line.
 * `undoCause()` (optional) runs first and undoes what moved them (Options: the cap before the lower
 * one is put back, so the next new chat does not move them again); when it fails nothing is restored.
 */
export function evictedNotice({ storage, ids, names = [], onRestored, undoCause, explain = (e) => String(e?.message || e), dismissable = true }) {
  const what = evictedText(ids.length);
  const text = h('strong', { testid: 'evicted-text', text: names.length ? t('uiEvictedNamed', what, nameList(names)) : t('uiSentence', what) });
  const detail = h('div', { class: 'notice-detail', text: t('uiUndoBringsBack') });
  const undo = h('button', { type: 'button', class: 'btn btn-small', testid: 'evicted-undo', text: t('uiUndo') });
  const el = h('div', { class: 'notice notice-info evicted', testid: 'evicted-notice', role: 'status' },
    h('div', { class: 'notice-text' }, text, detail),
    undo,
    dismissable ? iconButton('x', t('uiDismiss'), { testid: 'notice-dismiss', on: { click: () => el.remove() } }) : null);
  undo.addEventListener('click', async () => {
    undo.disabled = true;
    undo.setAttribute('aria-busy', 'true');
    try {
      await undoCause?.();
    } catch (err) {
      undo.removeAttribute('aria-busy');
      undo.disabled = false;
      replaceChildren(detail, t('uiCouldNotBringBack', formatNumber(ids.length), explain(err)));
      return;
    }
    const r = await restoreAll(storage, ids);
    undo.removeAttribute('aria-busy');
    if (r.failed.length) {
      undo.disabled = false;
      replaceChildren(detail, t('uiCouldNotBringBack', formatNumber(r.failed.length), explain(r.failed[0].error)));
    } else {
      undo.remove();
      replaceChildren(text, r.restored.length === 1 ? t('uiBroughtBackOne', formatNumber(1)) : t('uiBroughtBackMany', formatNumber(r.restored.length)));
      detail.remove();
      el.dataset.restored = 'true';
    }
    onRestored?.(r.restored);
  });
  return el;
}
