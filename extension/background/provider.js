// Which provider a turn goes to and the body fields it needs: the active card of the `providers`
// setting (storage-model §3) and what request.build is asked to add for it.

import { t } from '../lib/i18n.js';
import { codeError } from './errors.js';

/** Provider kinds of the plain model APIs (auto-summary calls and overflow rescue use these). */
export const STREAM_KINDS = Object.freeze(['chat', 'responses', 'anthropic']);

/** Every provider kind a turn can go to: the model APIs and the agent servers (lib/agents.js). */
export const TURN_KINDS = Object.freeze([...STREAM_KINDS, 'runs', 'agent']);

/** Output cap sent to Anthropic, which requires `max_tokens` (4096 fits every Claude model; longer
 * replies get the continuation pass). */
const ANTHROPIC_MAX_TOKENS = 4096;

/** Not a string, or only white space. */
export function isBlank(s) {
  return typeof s !== 'string' || s.trim() === '';
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * The active provider card and the labels stamped on its replies.
 * `activeProvider` names a card by id (or by name); a stale id falls back to the first card.
 * `key` is the reply's `providerKey` (storage-model §2.2): `{name, model, id}`, `id` being the card's
 * id. Only a reply that carries the id of one of the person's cards may switch the panel back to its
 * provider when its chat is loaded (sidepanel/switcher.js chatModel); a name alone is only offered.
 * @returns {{provider: {kind, baseUrl, apiKey, model}, label: string, key: {name: string, model: string, id?: string}}}
 */
export function pickProvider(settings = {}) {
  const cards = Array.isArray(settings.providers) ? settings.providers.filter(isObject) : [];
  const want = settings.activeProvider;
  const card =
    cards.find((c) => want != null && c.id === want) ??
    cards.find((c) => typeof want === 'string' && want !== '' && c.name === want) ??
    cards[0];
  if (!card) throw codeError('no_provider', t('bgNoProvider'));
  const kind = card.kind ?? 'chat';
  if (!TURN_KINDS.includes(kind)) {
    throw codeError('unsupported', t('bgProviderKindUnsupported', kind));
  }
  if (isBlank(card.baseUrl)) throw codeError('no_provider', t('bgProviderNoBaseUrl', card.name ?? card.id));
  // the host keeps API keys in the system's secret store; one it could not read comes back empty
  // with the reason (PROTOCOL.md "API keys"): say so instead of sending no key to the provider
  if (isBlank(card.apiKey) && !isBlank(card.apiKeyUnavailable)) {
    throw codeError('no_provider', t('bgProviderKeyUnreadable', card.name ?? card.id, card.apiKeyUnavailable));
  }
  const model =
    (typeof settings.activeModel === 'string' && settings.activeModel.trim()) ||
    (typeof card.model === 'string' ? card.model.trim() : '');
  const name = String(card.name ?? card.id ?? kind);
  return {
    provider: { kind, baseUrl: card.baseUrl, apiKey: card.apiKey ?? '', model },
    label: model ? `${name} · ${model}` : name,
    key: typeof card.id === 'string' && card.id ? { name, model, id: card.id } : { name, model },
  };
}

/**
 * Extra top-level body fields for request.build (llm.js sets model/stream again; harmless). The
 * agent kinds stream by their own protocol: `runs` gets the model only, `agent` nothing (its
 * envelope is built from `{text, images}` alone, lib/agents.js).
 */
export function bodyFieldsFor(provider, { maxTokens = ANTHROPIC_MAX_TOKENS, stream = true } = {}) {
  const f = {};
  if (provider.kind === 'agent') return f;
  if (provider.kind === 'runs') {
    if (provider.model) f.model = provider.model;
    return f;
  }
  if (provider.model) f.model = provider.model;
  f.stream = stream;
  if (provider.kind === 'anthropic') f.max_tokens = maxTokens;
  return f;
}
