// node --test extension/background/provider.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { bodyFieldsFor, pickProvider } from './provider.js';

const PROVIDERS = {
  providers: [
    { id: 'p1', name: 'OpenAI', kind: 'chat', baseUrl: 'https://api.example/v1', apiKey: 'k', model: 'gpt-x' },
    { id: 'p2', name: 'Claude', kind: 'anthropic', baseUrl: 'https://api.anthropic.example', apiKey: 'k2', model: 'c-3' },
  ],
  activeProvider: 'p1',
  activeModel: 'gpt-x',
  systemPrompt: 'Be brief.',
};

test('pickProvider: active card, model override, labels; errors', () => {
  const p = pickProvider({ ...PROVIDERS, activeProvider: 'p2', activeModel: 'c-4' });
  assert.deepEqual(p.provider, { kind: 'anthropic', baseUrl: 'https://api.anthropic.example', apiKey: 'k2', model: 'c-4' });
  assert.equal(p.label, 'Claude · c-4');
  assert.deepEqual(p.key, { name: 'Claude', model: 'c-4', id: 'p2' }, "the reply is stamped with the card's id (what lets loading its chat switch back)");
  assert.deepEqual(pickProvider({ providers: [{ name: 'Old', kind: 'chat', baseUrl: 'http://x/v1', model: 'm' }] }).key, { name: 'Old', model: 'm' }, 'a card without an id: no id');
  assert.equal(pickProvider({ ...PROVIDERS, activeProvider: 'gone', activeModel: '' }).provider.model, 'gpt-x');
  assert.throws(() => pickProvider({}), { code: 'no_provider' });
  assert.throws(() => pickProvider({ providers: [{ id: 'a', kind: 'telepathy', baseUrl: 'x' }] }), { code: 'unsupported' });
  assert.throws(() => pickProvider({ providers: [{ id: 'a', kind: 'chat', baseUrl: '' }] }), { code: 'no_provider' });
});

test('pickProvider: a key the host could not read from the secret store is named, not sent empty', () => {
  const card = { id: 'a', name: 'Cloud', kind: 'chat', baseUrl: 'https://x.example/v1', apiKey: '', apiKeyUnavailable: 'the Secret Service (D-Bus) cannot be read now: locked' };
  assert.throws(() => pickProvider({ providers: [card] }), (e) => e.code === 'no_provider' && /secret store/.test(e.message) && /locked/.test(e.message));
  // a key typed since (or a local server without one) is used as it is
  assert.equal(pickProvider({ providers: [{ ...card, apiKey: 'sk-new' }] }).provider.apiKey, 'sk-new');
  assert.equal(pickProvider({ providers: [{ ...card, apiKeyUnavailable: undefined }] }).provider.apiKey, '');
});

test('the agent kinds: picked like the others; runs bodies carry the model only, agent bodies nothing', () => {
  for (const kind of ['runs', 'agent']) {
    const p = pickProvider({ providers: [{ id: 'a', name: 'Agent', kind, baseUrl: 'http://127.0.0.1:4096', model: '' }] });
    assert.equal(p.provider.kind, kind);
    assert.equal(p.label, 'Agent');
  }
  assert.deepEqual(bodyFieldsFor({ kind: 'runs', model: 'hermes-agent' }), { model: 'hermes-agent' });
  assert.deepEqual(bodyFieldsFor({ kind: 'runs', model: '' }), {});
  assert.deepEqual(bodyFieldsFor({ kind: 'agent', model: 'anthropic/claude' }), {});
  assert.deepEqual(bodyFieldsFor({ kind: 'chat', model: 'm' }), { model: 'm', stream: true });
});
