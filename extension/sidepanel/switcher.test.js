// node --test extension/sidepanel/switcher.test.js
//
// The provider and model switcher on a fake DOM: the provider cards listed, the chosen
// provider's models offered (any name still typed), "Use" stores activeProvider and activeModel;
// a failed listing says why; no provider opens Options. chatModel: what loading a chat may do about
// its provider (switch for a reply stamped with a card's id, only offer otherwise), and the offer.
// The real panel: tests/e2e/layout.e2e.mjs, providers.e2e.mjs, chat-model.e2e.mjs.

import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeDom, fire, byTestId } from '../test-support/fake-dom.js';
import { flush } from '../test-support/fakes.js';
import { h } from '../lib/ui/dom.js';
import { createSwitcher, chatModel, chatModelOffer } from './switcher.js';

let dom;
beforeEach(() => {
  dom = installFakeDom();
});
afterEach(() => dom.restore());

const CARDS = [
  { id: 'a', name: 'Local', kind: 'chat', baseUrl: 'http://localhost:11434/v1', model: 'llama3.2' },
  { id: 'b', name: 'Hosted', kind: 'anthropic', baseUrl: 'https://api.anthropic.com', model: 'claude-x', apiKey: 'k' },
];

function setup({ settings = { providers: CARDS, activeProvider: 'a', activeModel: 'qwen2.5' }, models = {} } = {}) {
  const button = h('button', { type: 'button', testid: 'model-label' });
  const anchor = h('form', { testid: 'composer' });
  document.body.append(button, anchor);
  const sets = [];
  const listed = [];
  let changed = 0;
  let options = 0;
  const sw = createSwitcher({
    button,
    anchor,
    storage: { settings: { get: async () => settings, set: async (a) => void sets.push(a) } },
    onChanged: () => changed++,
    openOptions: () => options++,
    listModels: async (card) => {
      listed.push(card.id);
      return models[card.id] ?? { ok: true, models: [] };
    },
  });
  return { sw, button, sets, listed, changed: () => changed, options: () => options };
}

async function settle() {
  for (let i = 0; i < 5; i++) await flush();
}

test('the switcher lists the providers, offers the listed models, and Use stores the choice', async () => {
  const s = setup({ models: { a: { ok: true, models: ['llama3.2', 'qwen2.5'] }, b: { ok: true, models: ['claude-x', 'claude-y'] } } });
  s.button.click();
  await settle();
  const $ = (id) => byTestId(document.body, id);
  assert.equal(s.button.getAttribute('aria-expanded'), 'true');
  assert.deepEqual([...$('switch-provider').querySelectorAll('option')].map((o) => o.textContent), ['Local', 'Hosted']);
  assert.equal($('switch-provider').value, 'a');
  assert.equal($('switch-model').value, 'qwen2.5', "the active model, not the card's");
  assert.deepEqual([...document.body.querySelectorAll('datalist option')].map((o) => o.textContent), ['llama3.2', 'qwen2.5']);
  assert.equal($('switch-status').textContent, '2 models listed; any name can be typed.');

  $('switch-provider').value = 'b';
  fire($('switch-provider'), 'change');
  await settle();
  assert.deepEqual(s.listed, ['a', 'b']);
  assert.equal($('switch-model').value, 'claude-x', "another provider starts from its card's model");
  $('switch-model').value = 'claude-y';
  fire($('switcher'), 'submit');
  await settle();
  assert.deepEqual(s.sets, [{ map: { activeProvider: 'b', activeModel: 'claude-y' } }]);
  assert.equal(s.changed(), 1);
  assert.equal($('switcher'), null, 'closed after Use');
  assert.equal(document.activeElement, s.button);
});

test('a name the provider does not list is taken as typed; a failed listing says why; Escape closes; a blank name is refused', async () => {
  const s = setup({ models: { a: { ok: false, detail: 'Could not reach http://localhost:11434/v1/models (Failed to fetch)' } } });
  s.button.click();
  await settle();
  const $ = (id) => byTestId(document.body, id);
  assert.match($('switch-status').textContent, /^Could not list the models \(Could not reach http:\/\/localhost:11434\/v1\/models \(Failed to fetch\)\); type a model name\.$/);
  $('switch-model').value = '  ';
  fire($('switcher'), 'submit');
  await settle();
  assert.deepEqual(s.sets, []);
  assert.equal($('switch-status').textContent, 'Give a model name.');
  $('switch-model').value = 'my-finetune:7b';
  fire($('switcher'), 'submit');
  await settle();
  assert.deepEqual(s.sets, [{ map: { activeProvider: 'a', activeModel: 'my-finetune:7b' } }]);

  s.button.click();
  await settle();
  fire($('switch-model'), 'keydown', { key: 'Escape' });
  assert.equal($('switcher'), null);
});

test('with no provider the label opens Options', async () => {
  const s = setup({ settings: { providers: [] } });
  s.button.click();
  await settle();
  assert.equal(s.options(), 1);
  assert.equal(byTestId(document.body, 'switcher'), null);
});

test("chatModel: a reply this installation wrote with one of the cards (its id) switches to its provider and model", () => {
  const reply = (id, name, model) => ({ role: 'assistant', content: 'x', providerKey: { name, model, id } });
  const entries = [{ role: 'user', content: 'q' }, reply('a', 'Local', 'llama3.2'), { role: 'user', content: 'q2' }, reply('b', 'Hosted', 'claude-y'), { role: 'user', content: 'q3' }];
  assert.deepEqual(chatModel(entries, CARDS), { action: 'switch', providerId: 'b', name: 'Hosted', model: 'claude-y' });
  assert.equal(chatModel(entries, CARDS.filter((c) => c.id === 'a')), null, 'a deleted provider: nothing');
  assert.equal(chatModel([{ role: 'user', content: 'q' }], CARDS), null, 'no reply yet');
  assert.equal(chatModel([{ role: 'assistant', content: 'old reply without a key' }], CARDS), null);
  assert.equal(chatModel([reply('b', 'Hosted', '')], CARDS), null, 'no model: nothing');
  assert.equal(chatModel([reply('b', 'Hosted', '   ')], CARDS), null, 'a blank model: nothing');
  const renamed = [{ ...CARDS[0], name: 'My Ollama' }, CARDS[1]];
  assert.deepEqual(chatModel([reply('a', 'Local', 'llama3.2')], renamed), { action: 'switch', providerId: 'a', name: 'My Ollama', model: 'llama3.2' }, 'a renamed card still matches by id');
  assert.deepEqual(chatModel([reply('a', 'Hosted', 'llama3.2')], CARDS).providerId, 'a', 'the id wins over a name');
});

test('chatModel: a reply named only by its provider (older replies, imported chats, an id that is no card of yours) is only offered', () => {
  const CRAFTED = { role: 'assistant', content: 'x', providerKey: { name: 'Hosted', model: 'claude-opus-expensive' } };
  assert.deepEqual(chatModel([CRAFTED], CARDS), { action: 'offer', providerId: 'b', name: 'Hosted', model: 'claude-opus-expensive' });
  const foreignId = { ...CRAFTED, providerKey: { ...CRAFTED.providerKey, id: 'not-a-card-of-yours' } };
  assert.equal(chatModel([foreignId], CARDS).action, 'offer', 'an id naming no card: offer by name at most');
  assert.equal(chatModel([{ ...foreignId, providerKey: { id: 'nope', name: 'Nobody', model: 'm' } }], CARDS), null);
  for (const id of [7, '', null, { id: 'b' }, ['b']]) {
    assert.equal(chatModel([{ ...CRAFTED, providerKey: { ...CRAFTED.providerKey, id } }], CARDS).action, 'offer', `id ${JSON.stringify(id)}`);
  }
  for (const providerKey of [null, 'Hosted', ['Hosted', 'm'], { name: 'Hosted', model: 5 }]) {
    assert.equal(chatModel([{ role: 'assistant', content: 'x', providerKey }], CARDS), null, JSON.stringify(providerKey));
  }
  assert.equal(chatModel([CRAFTED], [{ name: 'Hosted', model: 'x' }]), null, 'a card without an id is never picked');
});

test('chatModelOffer: nothing happens until "Use it" is pressed; then it stores the choice and says so', async () => {
  let used = 0;
  let fail = null;
  const el = chatModelOffer({ name: 'Hosted', model: 'claude-opus-expensive' }, {
    onUse: async () => {
      used++;
      if (fail) throw fail;
    },
  });
  document.body.append(el);
  const $ = (id) => byTestId(document.body, id);
  assert.equal($('chat-model-offer-text').textContent, 'This chat was answered with Hosted · claude-opus-expensive.');
  assert.equal(el.getAttribute('role'), 'status');
  const use = $('chat-model-use');
  assert.equal(use.tagName, 'BUTTON', 'a button: reachable with the keyboard');
  assert.equal(use.textContent, 'Use it');
  await settle();
  assert.equal(used, 0, 'shown, not used');
  fail = new Error('host away');
  use.click();
  await settle();
  assert.equal(used, 1);
  assert.match(el.textContent, /Could not switch: host away/);
  assert.equal(use.disabled, false, 'can be tried again');
  fail = null;
  use.click();
  await settle();
  assert.equal(used, 2);
  assert.equal($('chat-model-use'), null);
  assert.equal($('chat-model-offer-text').textContent, 'This chat goes on with Hosted · claude-opus-expensive, as its last reply did.');
  assert.equal(el.dataset.used, 'true');
  $('notice-dismiss').click();
  assert.equal($('chat-model-offer'), null, 'dismissed');
});
