// The provider and model switcher of the side panel (the model label in the composer bar opens
// it): the provider cards of Options in a list, the models the chosen provider lists (fetched
// from it, lib/llm.js `listModels`) offered for the model field, which still takes any name.
// "Use" stores `activeProvider` and `activeModel` (settings.set); the worker reads them for the
// next message (its SettingsMemory hears the settings change), and the label shows them.

import { t, formatNumber } from '../lib/i18n.js';
import { h, iconButton, replaceChildren } from '../lib/ui/dom.js';

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
 * The provider and model a chat was answered with, and what loading it may do about them. Stored
 * data never picks the provider by itself (issue 30): its newest reply's `providerKey` (storage-model
 * §2.2) is `{id, name, model}` when this installation's worker wrote the reply, `id` being the
 * provider card it used.
 * - `switch`: `id` names one of the provider cards and `model` is not empty. Loading the chat goes
 *   on with that card and model, so each chat keeps its model.
 * - `offer`: no such `id` (a reply written before the stamp, a chat from an imported file, an id that
 *   is not one of the cards), but a card has that `name` and `model` is not empty. The panel only
 *   offers the switch (`chatModelOffer`); nothing changes until the person says so.
 * - `null`: no reply, no model, or no card of that id or name.
 * An `id` takes precedence over a `name`: a card renamed since still matches by id.
 * @param {object[]} entries the chat's entries (newest last)
 * @param {object[]} providers the provider cards
 * @returns {{action: 'switch' | 'offer', providerId: string, name: string, model: string} | null}
 */
export function chatModel(entries, providers) {
  const cards = (Array.isArray(providers) ? providers : []).filter((p) => p && typeof p.id === 'string' && p.id);
  for (let i = (Array.isArray(entries) ? entries.length : 0) - 1; i >= 0; i--) {
    const e = entries[i];
    if (e?.role !== 'assistant') continue;
    const key = e.providerKey;
    if (!key || typeof key !== 'object' || typeof key.model !== 'string' || !key.model.trim()) return null;
    const model = key.model.trim();
    const byId = typeof key.id === 'string' && key.id ? cards.find((p) => p.id === key.id) : null;
    if (byId) return { action: 'switch', providerId: byId.id, name: String(byId.name || byId.id), model };
    const byName = typeof key.name === 'string' && key.name ? cards.find((p) => p.name === key.name) : null;
    return byName ? { action: 'offer', providerId: byName.id, name: String(byName.name), model } : null;
  }
  return null;
}

/**
 * The offer of a chat's provider and model (`chatModel` said `offer`): a notice "This chat was
 * answered with X · m." with a "Use it" button (data-testid `chat-model-use`) and Dismiss. Nothing
 * happens until the button is pressed; then `onUse()` runs (it stores the choice) and the notice
 * says the chat goes on with it, or why it could not.
 * @param {{name: string, model: string}} pick
 * @param {{onUse: () => Promise<void>}} deps
 * @returns {HTMLElement}
 */
export function chatModelOffer(pick, { onUse }) {
  const what = `${pick.name} · ${pick.model}`;
  const text = h('strong', { testid: 'chat-model-offer-text', text: t('panelChatModelOffer', what) });
  const detail = h('div', { class: 'notice-detail', text: t('panelChatModelOfferDetail') });
  const use = h('button', { type: 'button', class: 'btn btn-small', testid: 'chat-model-use', text: t('panelChatModelUse') });
  const el = h('div', { class: 'notice notice-info chat-model-offer', testid: 'chat-model-offer', role: 'status' },
    h('div', { class: 'notice-text' }, text, detail),
    use,
    iconButton('x', t('msgDismiss'), { testid: 'notice-dismiss', on: { click: () => el.remove() } }));
  use.addEventListener('click', async () => {
    use.disabled = true;
    use.setAttribute('aria-busy', 'true');
    try {
      await onUse();
      use.remove();
      replaceChildren(text, t('panelChatModel', what));
      detail.remove();
      el.dataset.used = 'true';
    } catch (err) {
      use.disabled = false;
      replaceChildren(detail, t('panelChatModelFailedWhy', err?.message ?? String(err)));
    } finally {
      use.removeAttribute('aria-busy');
    }
  });
  return el;
}
