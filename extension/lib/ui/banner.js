// Host status banner: what is wrong (explainHostError), the browser's own text, the one command that
// fixes it, and a Retry button. Shared by the side panel and the options page.

import { explainHostError } from '../protocol.js';
import { h, replaceChildren, copyText, iconButton } from './dom.js';
import { t } from '../i18n.js';

/** Codes that mean "the host connection or the database is not usable" (banner, not a toast). */
export const CONNECTION_CODES = new Set([
  'host_not_found', 'host_forbidden', 'host_exited', 'host_io', 'disconnected', 'timeout',
  'protocol_mismatch', 'db_corrupt', 'db_too_new', 'unknown_op', 'forbidden_origin',
]);

const GENERIC = new Set(['disconnected', 'timeout']);

export function isConnectionError(err) {
  return !!err && CONNECTION_CODES.has(err.code);
}

/**
 * createBanner(el, {onRetry}) → {show(err), hide(), visible}
 * `onRetry` returns a promise; the button shows a spinner while it runs.
 */
export function createBanner(el, { onRetry } = {}) {
  el.setAttribute('role', 'alert');
  el.hidden = true;
  let retrying = false;

  function show(err) {
    const code = err?.code || 'disconnected';
    // A generic follow-up (a pending call cut off by a reconnect, a timeout) never hides the specific
    // cause already on screen (not found / forbidden / exited / damaged database).
    if (!el.hidden && GENERIC.has(code) && el.dataset.code && !GENERIC.has(el.dataset.code)) return;
    const ex = explainHostError(err);
    el.dataset.code = err?.code || 'disconnected';
    const retry = h('button', {
      type: 'button', class: 'btn btn-small', testid: 'host-retry', text: retrying ? t('uiRetrying') : t('uiRetry'),
      disabled: retrying,
      on: {
        click: async () => {
          if (retrying || !onRetry) return;
          retrying = true;
          retry.disabled = true;
          retry.textContent = t('uiRetrying');
          retry.setAttribute('aria-busy', 'true');
          try {
            await onRetry();
          } finally {
            retrying = false;
            retry.disabled = false;
            retry.textContent = t('uiRetry');
            retry.removeAttribute('aria-busy');
          }
        },
      },
    });
    const fix = ex.fix
      ? h('div', { class: 'banner-fix' },
          h('span', { class: 'banner-fix-label', text: `${t('uiFixLabel')} ` }),
          h('code', { testid: 'host-fix', text: ex.fix }),
          iconButton('copy', t('uiCopyCommand'), { testid: 'host-fix-copy', on: { click: () => copyText(ex.fix) } }),
          ex.then ? h('div', { class: 'banner-then', testid: 'host-fix-then', text: ex.then }) : null)
      : null;
    replaceChildren(el,
      h('div', { class: 'banner-text' },
        h('strong', { class: 'banner-title', testid: 'host-banner-title', text: ex.title }),
        ex.detail ? h('div', { class: 'banner-detail', testid: 'host-banner-detail', text: ex.detail }) : null,
        fix),
      h('div', { class: 'banner-actions' }, retry));
    el.hidden = false;
  }

  function hide() {
    el.hidden = true;
    delete el.dataset.code;
  }

  return { show, hide, get visible() { return !el.hidden; } };
}
