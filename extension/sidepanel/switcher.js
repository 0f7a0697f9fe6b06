// The provider and model switcher of the side panel (the model label in the composer bar opens
// it): the provider cards of Options in a list, the models the chosen provider lists (fetched
// from it, lib/llm.js `listModels`) offered for the model field, which still takes any name.
// "Use" stores `activeProvider` and `activeModel` (settings.set); the worker reads them for the
// next message (its SettingsMemory hears the settings change), and the label shows them.

import { t, formatNumber } from '../lib/i18n.js';
import { h, replaceChildren } from '../lib/ui/dom.js';

/** lib/llm.js's listModels, loaded when the switcher first lists models (not at panel start). */
async function defaultListModels(card) {
  const { listModels } = await import('../lib/llm.js');
  return listModels(card);
}

/**
 * @param {object} deps
 * @param {HTMLElement} deps.button   the model label (opens and closes the switcher)
 * @param {HTMLElement} deps.anchor   the switcher is placed before this element (the composer)
 * @param {{settings: {get: Function, set: Function}}} deps.storage
 * @param {() => void} deps.onChanged  after a new provider or model is stored
 * @param {() => void} [deps.openOptions]
 * @param {(card: object) => Promise<{ok: boolean, models?: string[], detail?: string}>} [deps.listModels]
 */
export function createSwitcher({ button, anchor, storage, onChanged, openOptions = () => {}, listModels = defaultListModels }) {
  let box = null;
  let providers = [];
  let listing = 0; // the latest model listing asked for (older answers are ignored)

  function close({ focus = true } = {}) {
    if (!box) return;
    box.remove();
    box = null;
    button.setAttribute('aria-expanded', 'false');
    if (focus) button.focus();
  }

  async function fillModels(card, datalist, status) {
    const mine = ++listing;
    replaceChildren(datalist, []);
    status.textContent = card.baseUrl ? t('switchAsking') : '';
    if (!card.baseUrl) return;
    const r = await listModels(card);
    if (mine !== listing || !box) return;
    if (!r.ok) {
      status.textContent = t('switchListFailed', r.detail);
      return;
    }
    replaceChildren(datalist, r.models.map((m) => h('option', { value: m, text: m })));
    status.textContent = r.models.length === 1 ? t('switchListedOne') : r.models.length ? t('switchListed', formatNumber(r.models.length)) : t('switchNoModels');
  }

  async function open() {
    if (box) return;
    let s;
    try {
      s = await storage.settings.get({ keys: ['providers', 'activeProvider', 'activeModel'] });
    } catch {
      openOptions();
      return;
    }
    providers = (Array.isArray(s?.providers) ? s.providers : []).filter((p) => p && typeof p.id === 'string');
    if (!providers.length) {
      openOptions();
      return;
    }
    const current = providers.find((p) => p.id === s.activeProvider) ?? providers[0];
    const select = h('select', { testid: 'switch-provider', 'aria-label': t('switchProvider') },
      providers.map((p) => h('option', { value: p.id, text: p.name || p.id })));
    select.value = current.id;
    const datalist = h('datalist', { id: 'switch-models' });
    const model = h('input', { type: 'text', testid: 'switch-model', 'aria-label': t('switchModel'), spellcheck: 'false', autocomplete: 'off' });
    model.setAttribute('list', 'switch-models'); // `list` is read-only as a property
    model.value = (current.id === s.activeProvider && typeof s.activeModel === 'string' && s.activeModel) || current.model || '';
    const status = h('div', { class: 'switcher-status', testid: 'switch-status', role: 'status' });
    const use = h('button', { type: 'submit', class: 'btn btn-small btn-primary', testid: 'switch-apply', text: t('switchUse') });
    const more = h('button', { type: 'button', class: 'btn btn-small', testid: 'switch-options', text: t('switchProviders') });
    const form = h('form', { class: 'switcher', testid: 'switcher', 'aria-label': t('switchLabel') },
      h('div', { class: 'switcher-row' }, select, model),
      datalist,
      h('div', { class: 'switcher-row' }, status, use, more));
    select.addEventListener('change', () => {
      const card = providers.find((p) => p.id === select.value);
      model.value = card?.model || '';
      if (card) fillModels(card, datalist, status);
    });
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const card = providers.find((p) => p.id === select.value);
      const name = model.value.trim();
      if (!card) return;
      if (!name) {
        status.textContent = t('switchNeedModel');
        model.focus();
        return;
      }
      use.disabled = true;
      try {
        await storage.settings.set({ map: { activeProvider: card.id, activeModel: name } });
        close();
        onChanged();
      } catch (err) {
        status.textContent = t('switchFailed', err?.message ?? err);
        use.disabled = false;
      }
    });
    form.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') {
        e.preventDefault();
        e.stopPropagation();
        close();
      }
    });
    more.addEventListener('click', () => {
      close({ focus: false });
      openOptions();
    });
    box = form;
    anchor.before(form);
    button.setAttribute('aria-expanded', 'true');
    model.focus();
    fillModels(current, datalist, status);
  }

  button.setAttribute('aria-haspopup', 'true');
  button.setAttribute('aria-expanded', 'false');
  button.title = t('panelModelLabelTitle');
  button.addEventListener('click', () => (box ? close() : open()));

  return {
    open,
    close,
    get isOpen() {
      return !!box;
    },
  };
}

/**
 * The provider and model a chat was answered with: its newest reply's `providerKey` ({name,
 * model}, storage-model §2.2), when a provider card of that name still exists. Loading the chat
 * switches to it, so each chat keeps its model.
 * @param {object[]} entries the chat's entries (newest last)
 * @param {object[]} providers the provider cards
 * @returns {{providerId: string, name: string, model: string} | null}
 */
export function chatModel(entries, providers) {
  for (let i = (Array.isArray(entries) ? entries.length : 0) - 1; i >= 0; i--) {
    const e = entries[i];
    if (e?.role !== 'assistant') continue;
    const key = e.providerKey;
    if (!key || typeof key.name !== 'string' || typeof key.model !== 'string' || !key.model) return null;
    const card = (Array.isArray(providers) ? providers : []).find((p) => p && p.name === key.name);
    return card ? { providerId: card.id, name: card.name, model: key.model } : null;
  }
  return null;
}
