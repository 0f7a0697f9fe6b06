import test from 'node:test';
import assert from 'node:assert/strict';
import {
  KINDS, PRESETS, cardFromPreset, normalizeCard, validateCard, upsertCard, afterDelete,
  insecureBaseUrlWarning,
  parseWholeNumber, parsePositiveWholeNumber, withDefaults, summarizeBrowserDump, OPTION_KEYS, keyPlaceholder,
  keyInFileNote, secretStoreReason } from './providers.js';

let n = 0;
const newId = () => `id-${++n}`;

test('presets cover the documented endpoints', () => {
  const by = Object.fromEntries(PRESETS.map((p) => [p.id, p]));
  assert.equal(by.ollama.baseUrl, 'http://localhost:11434/v1');
  assert.equal(by.lmstudio.baseUrl, 'http://localhost:1234/v1');
  assert.equal(by.openrouter.baseUrl, 'https://openrouter.ai/api/v1');
  assert.equal(by.anthropic.baseUrl, 'https://api.anthropic.com');
  assert.equal(by.anthropic.kind, 'anthropic');
  assert.equal(by['openai-responses'].kind, 'responses');
});

test('cards from presets get unique names and ids', () => {
  const a = cardFromPreset('ollama', newId, []);
  assert.deepEqual(a, { id: 'id-1', name: 'Ollama', kind: 'chat', baseUrl: 'http://localhost:11434/v1', apiKey: '', model: 'llama3.2' });
  const b = cardFromPreset('ollama', newId, ['ollama']);
  assert.equal(b.name, 'Ollama 2');
  assert.equal(cardFromPreset('ollama', newId, ['OLLAMA', 'Ollama 2']).name, 'Ollama 3', 'case-insensitive; the first free number');
  assert.equal(cardFromPreset('ollama', newId, [' ollama 3 ', 'Ollama']).name, 'Ollama 2');
  assert.equal(cardFromPreset('nope', newId).name, 'Custom');
});

test('normalize and validate', () => {
  assert.deepEqual(normalizeCard({ id: ' a ', name: ' N ', kind: 'zzz', baseUrl: 'http://h/v1//', apiKey: ' k ', model: ' m ' }),
    { id: 'a', name: 'N', kind: 'chat', baseUrl: 'http://h/v1', apiKey: 'k', model: 'm' });
  assert.deepEqual(validateCard({ id: 'a', name: 'N', kind: 'chat', baseUrl: 'http://localhost:1/v1', model: 'm' }), {});
  const e = validateCard({ id: 'a', name: '', kind: 'bad', baseUrl: 'ftp://x', model: '' });
  assert.deepEqual(Object.keys(e).sort(), ['baseUrl', 'kind', 'model', 'name']);
  assert.equal(validateCard({ id: 'a', name: 'Same', kind: 'chat', baseUrl: 'https://x', model: 'm' }, [{ id: 'b', name: 'same' }]).name, 'Another provider already has this name.');
  assert.equal(validateCard({ id: 'a', name: 'N', kind: 'chat', baseUrl: 'not a url', model: 'm' }).baseUrl !== undefined, true);
});

test('list helpers', () => {
  assert.deepEqual(withDefaults({ providers: [{ id: 'a' }, null, { id: '' }, 'x', { name: 'no id' }] }).providers, [{ id: 'a' }]);
  assert.deepEqual(withDefaults({ providers: 'x' }).providers, []);
  assert.deepEqual(upsertCard([{ id: 'a', v: 1 }], { id: 'a', v: 2 }), [{ id: 'a', v: 2 }]);
  assert.deepEqual(upsertCard([{ id: 'a' }], { id: 'b' }), [{ id: 'a' }, { id: 'b' }]);
  const list = [{ id: 'a', model: 'ma' }, { id: 'b', model: 'mb' }];
  assert.deepEqual(afterDelete(list, 'a', 'a', 'ma'), { providers: [{ id: 'b', model: 'mb' }], activeProvider: 'b', activeModel: 'mb' });
  assert.deepEqual(afterDelete(list, 'b', 'a', 'x'), { providers: [{ id: 'a', model: 'ma' }], activeProvider: 'a', activeModel: 'x' });
  assert.deepEqual(afterDelete([{ id: 'a' }], 'a', 'a', 'x'), { providers: [], activeProvider: '', activeModel: '' });
});

test('whole numbers', () => {
  assert.deepEqual(parseWholeNumber(''), { ok: true, value: 0 });
  assert.deepEqual(parseWholeNumber(' 100,000 '), { ok: true, value: 100000 });
  assert.equal(parseWholeNumber('1.5').ok, false);
  assert.equal(parseWholeNumber('-3').ok, false);
  assert.equal(parseWholeNumber('abc').ok, false);
  assert.equal(parseWholeNumber('99999999999999999999').ok, false);
  assert.deepEqual(parseWholeNumber('', { emptyValue: 50 }), { ok: true, value: 50 });
});

test('defaults overlay', () => {
  assert.deepEqual(withDefaults({}), { providers: [], activeProvider: '', activeModel: '', systemPrompt: '', autoSummarizeAttachments: true, summarizeThresholdChars: 0, maxSessions: 0, trashDays: 30 });
  const w = withDefaults({ autoSummarizeAttachments: false, summarizeThresholdChars: 5.5, maxSessions: 0 });
  assert.equal(w.autoSummarizeAttachments, false);
  assert.equal(w.summarizeThresholdChars, 0);
  assert.equal(w.maxSessions, 0);
  assert.equal(withDefaults({ maxSessions: 7, trashDays: 3 }).maxSessions, 7);
  assert.equal(withDefaults({ trashDays: 0 }).trashDays, 30, 'trashDays is at least 1');
  assert.equal(withDefaults({ trashDays: 3 }).trashDays, 3);
});

test('trashDays: a whole number of 1 or more, empty is the default 30', () => {
  assert.deepEqual(parsePositiveWholeNumber(''), { ok: true, value: 30 });
  assert.deepEqual(parsePositiveWholeNumber('7'), { ok: true, value: 7 });
  assert.equal(parsePositiveWholeNumber('0').ok, false);
  assert.equal(parsePositiveWholeNumber('1.5').ok, false);
  assert.equal(parsePositiveWholeNumber('-2').ok, false);
  assert.ok(OPTION_KEYS.includes('trashDays') && OPTION_KEYS.includes('maxSessions'));
});

test('browser dump summary', () => {
  assert.deepEqual(summarizeBrowserDump({}), { keys: 0, sessions: 0, history: 0, bodies: 0, settings: 0, empty: true });
  const s = summarizeBrowserDump({ history: [1, 2], savedSessions: [{ id: 'a' }], session_a: [], activeSessionId: 'a', providers: [], theme: 'x' });
  assert.deepEqual(s, { keys: 6, sessions: 1, history: 2, bodies: 1, settings: 2, empty: false });
});

test('plain http to anything but loopback is warned about (issue 18)', () => {
  for (const ok of [
    'https://api.openai.com/v1', 'https://192.168.1.5/v1', 'http://localhost:11434/v1', 'http://LOCALHOST:1234',
    'http://ollama.localhost/v1', 'http://localhost./v1', 'http://127.0.0.1:8080/v1', 'http://127.1.2.3/', 'http://127.1:1234',
    'http://[::1]:11434/v1', 'http://[::ffff:127.0.0.1]/', '', 'not a url',
  ]) {
    assert.equal(insecureBaseUrlWarning(ok), '', ok);
  }
  for (const bad of [
    'http://192.168.1.5:11434/v1', 'http://10.0.0.2/v1', 'http://example.com/v1', 'http://0.0.0.0:11434', 'http://[::2]/',
    'http://127.0.0.1.nip.io/v1', 'http://localhost.example.com/', 'HTTP://Example.COM',
  ]) {
    const w = insecureBaseUrlWarning(bad);
    assert.match(w, /^Not encrypted: this is plain http:\/\/ to /, bad);
    assert.ok(w.includes(new URL(bad).host), `names the host: ${w}`);
    assert.match(w, /Your API key and every message/);
  }
  assert.match(insecureBaseUrlWarning('http://10.0.0.2/v1', { hasKey: false }), /Every message would cross/);
  // the presets are https or loopback
  for (const p of PRESETS) assert.equal(insecureBaseUrlWarning(p.baseUrl), '', p.id);
  // loopback hosts are not warned about; look-alikes are
  assert.equal(insecureBaseUrlWarning('http://127.0.0.1/v1'), '');
  assert.equal(insecureBaseUrlWarning('http://[::1]:8080/v1'), '');
  assert.notEqual(insecureBaseUrlWarning('http://127.0.0.1.example/v1'), '');
  assert.notEqual(insecureBaseUrlWarning('http://128.0.0.1/v1'), '');
});

test('keyPlaceholder: local servers need no key; the hosted ones say theirs is required (not "not needed" on OpenAI)', () => {
  assert.equal(keyPlaceholder(cardFromPreset('openai', () => 'a')), 'sk-… (required: platform.openai.com/api-keys)');
  assert.equal(keyPlaceholder(cardFromPreset('anthropic', () => 'a')), 'sk-ant-… (required: console.anthropic.com)');
  assert.equal(keyPlaceholder(cardFromPreset('openrouter', () => 'a')), 'sk-or-… (required: openrouter.ai/keys)');
  for (const id of ['ollama', 'lmstudio']) assert.equal(keyPlaceholder(cardFromPreset(id, () => 'a')), 'not needed for a server on this computer or network', id);
  assert.equal(keyPlaceholder({ kind: 'chat', baseUrl: 'http://192.168.1.20:8080/v1' }), 'not needed for a server on this computer or network');
  assert.equal(keyPlaceholder({ kind: 'chat', baseUrl: 'https://llm.example.com/v1' }), 'API key (hosted providers need one)');
  assert.equal(keyPlaceholder({ kind: 'chat', baseUrl: '' }), 'API key (none for a local server)');
});

test('agent presets and kinds: Hermes Agent (runs) and opencode (agent); their model may stay empty', () => {
  const hermes = cardFromPreset('hermes', () => 'h1');
  assert.deepEqual({ kind: hermes.kind, baseUrl: hermes.baseUrl, name: hermes.name }, { kind: 'runs', baseUrl: 'http://127.0.0.1:8642', name: 'Hermes Agent (runs)' });
  const oc = cardFromPreset('opencode', () => 'o1');
  assert.deepEqual({ kind: oc.kind, baseUrl: oc.baseUrl, name: oc.name }, { kind: 'agent', baseUrl: 'http://127.0.0.1:4096', name: 'opencode (agent)' });
  assert.deepEqual(validateCard(hermes), {});
  assert.deepEqual(validateCard(oc), {});
  assert.deepEqual(validateCard({ ...oc, model: 'anthropic/claude-sonnet-4' }), {});
  assert.equal(normalizeCard({ ...oc, kind: 'agent' }).kind, 'agent');
  assert.ok(validateCard({ ...oc, kind: 'chat' }).model, 'a chat card still needs a model');
  const labels = Object.fromEntries(KINDS.map((k) => [k.value, k.label]));
  assert.equal(labels.runs, 'Hermes Agent runs (/v1/runs)');
  assert.equal(labels.agent, 'opencode server (agent sessions)');
});

test('keyInFileNote: Save says when the host kept the card\'s key in the database, why, and how to get a secret store here', () => {
  const reply = (reason, ids = ['c1']) => ({ keysInFile: { ids, secretStore: 'the Secret Service (D-Bus)', reason } });
  const dbus = 'no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist';
  const linux = keyInFileNote(reply(dbus), 'c1', 'linux');
  assert.ok(linux.startsWith('Saved — but its API key is stored in the database file as plain text'), linux);
  assert.ok(linux.includes(`(${dbus})`), 'the host\'s reason');
  assert.match(linux, /GNOME Keyring/);
  assert.match(linux, /KeePassXC/);
  assert.match(linux, /unlocked in your desktop session/);
  assert.match(keyInFileNote(reply('x'), 'c1', 'mac'), /macOS Keychain is normally always there/);
  assert.match(keyInFileNote(reply('x'), 'c1', 'win'), /Windows Credential Manager is normally always there/);
  assert.match(keyInFileNote(reply('x'), 'c1', ''), /GNOME Keyring or KeePassXC on Linux, in the macOS Keychain and in the Windows Credential Manager/);
  const off = keyInFileNote(reply('turned off by KEEPSAKE_SECRET_STORE=off'), 'c1', 'linux');
  assert.match(off, /\(turned off by KEEPSAKE_SECRET_STORE=off\)\. keepsake-host was started with KEEPSAKE_SECRET_STORE=off: start the browser without it/);
  assert.match(keyInFileNote(reply(null), 'c1', 'linux'), /no secret store is reachable \(not reachable\)/);
  // nothing to say: the key went to the secret store, no new key, or another card's key
  assert.equal(keyInFileNote({}, 'c1', 'linux'), '');
  assert.equal(keyInFileNote(undefined, 'c1', 'linux'), '');
  assert.equal(keyInFileNote(reply(dbus, ['other']), 'c1', 'linux'), '');
  assert.equal(keyInFileNote({ keysInFile: { ids: 'c1' } }, 'c1', 'linux'), '');
  assert.equal(secretStoreReason('this platform has no secret store keepsake-host can use'), 'this platform has no secret store keepsake-host can use');
  assert.equal(secretStoreReason('anything else'), 'anything else');
});
