// node --test extension/background/turns.test.js
//
// Unit tests drive createTurns with an in-memory host (FakeHost: the ops turns.js uses, behaving
// like keepsake-host) and a scripted fake llm. The last group runs the same engine against the
// REAL keepsake-host binary over stdio frames (skipped when target/debug/keepsake-host is absent).

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, endianness } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

import { createHash } from 'node:crypto';

import { createTurns, findUserEntryIndex, installTurnHandlers } from './turns.js';
import { BodyMemory } from './body-memory.js';
import { SettingsMemory, TURN_SETTING_KEYS } from './settings-memory.js';
import { bodyHasImages, collectTokens } from './image-tokens.js';
import { entryText, newestVideoSrc } from '../lib/entries.js';
import { createStorage } from '../lib/storage.js';

const PREFIX = '[Page context attached by Keepsake]';
// 1×1 PNGs (valid base64, canonical)
const RED =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const BLUE =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYPgPAAEDAQAIicLsAAAAAElFTkSuQmCC';
const png = (b64) => `data:image/png;base64,${b64}`;

const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
const tick = () => new Promise((r) => setImmediate(r));

function gate() {
  let open;
  const promise = new Promise((r) => (open = r));
  return { promise, open };
}

function hostError(code, message = code) {
  return Object.assign(new Error(message), { code });
}

function llmError(kind, message, extra = {}) {
  return Object.assign(new Error(message), { name: 'LlmError', kind, partial: '', ...extra });
}

// ---------------------------------------------------------------------------------------------
// FakeHost: the subset of operations turns.js calls, with the host's observable behaviour.

const OVERFLOW = /context[_ ]?(length|window|limit)|maximum context|prompt is too long|too many (input )?tokens/i;

function attachTextOf(e) {
  return entryText(e);
}
function isAttach(e) {
  return e?.role === 'user' && attachTextOf(e).startsWith(PREFIX);
}
function stubFor(e) {
  const t = attachTextOf(e);
  const title = /^Title: (.*)$/m.exec(t)?.[1];
  const url = /^URL: (.*)$/m.exec(t)?.[1];
  return [
    PREFIX,
    "[Keepsake: this attachment was too large for the model's context window and was omitted so the conversation could continue]",
    ...(title != null ? [`Title: ${title}`] : []),
    ...(url != null ? [`URL: ${url}`] : []),
    `Original size: ~${t.length} chars. If you need exact details from this page, ask the user to re-attach it.`,
  ].join('\n');
}

class FakeHost {
  constructor({ settings = {}, threshold = 100_000, chunkSize = 12_000, copiesVideoSrc = true } = {}) {
    this.copiesVideoSrc = copiesVideoSrc; // false: a host that refuses `copyVideoSrc` (bad_request)
    this.live = []; // the live window (tests set it up directly)
    this.prefix = []; // the live chat's entries ahead of the window (trimmed off it)
    this.binding = '';
    this.sessions = new Map(); // id → entries (the live chat's session: prefix + live, written on a switch)
    this.versions = []; // what history.branch kept: {sessionId, index, entries}
    this.ids = new WeakMap(); // entry object → entryId (kept off the entries the tests inspect)
    this.nextEntry = 1;
    this.settings = settings;
    this.threshold = threshold;
    this.chunkSize = chunkSize;
    this.calls = [];
    this.fail = {}; // op → error thrown by its next call
    this.onCall = null; // (op, args) hook
    this.hold = {}; // op → a promise its next call waits for before answering
    this.nextSession = 1;
    this.nextAttach = 1;
    const H = this;
    const op = (name, fn) => async (args = {}) => {
      const a = clone(args);
      H.calls.push({ op: name, args: a });
      H.onCall?.(name, a);
      await tick();
      if (H.hold[name]) {
        const wait = H.hold[name];
        delete H.hold[name];
        await wait;
      }
      if (H.fail[name]) {
        const e = H.fail[name];
        delete H.fail[name];
        throw e;
      }
      return clone(fn.call(H, a));
    };
    this.storage = {
      settings: { get: op('settings.get', H.settingsGet) },
      history: {
        get: op('history.get', H.historyGet),
        append: op('history.append', H.historyAppend),
        meta: op('history.meta', H.historyMeta),
        branch: op('history.branch', H.branch),
        markFailed: op('history.markFailed', H.markFailed),
        truncateFrom: op('history.truncateFrom', H.truncateFrom),
        clear: op('history.clear', H.clear),
        attach: op('history.attach', H.attach),
      },
      sessions: {
        load: op('sessions.load', H.load),
        appendTo: op('sessions.appendTo', H.appendTo),
        get: op('sessions.get', H.sessionGet),
      },
      attach: {
        trackChange: op('attach.trackChange', () => ({ changed: false })),
        summaryPlan: op('attach.summaryPlan', H.summaryPlan),
        applySummary: op('attach.applySummary', H.applySummary),
      },
      request: {
        build: op('request.build', H.build),
        isContextOverflow: op('request.isContextOverflow', (a) => OVERFLOW.test(a.message ?? '') && !/rate.?limit/i.test(a.message)),
        commitRescue: op('request.commitRescue', H.commitRescue),
      },
      images: { get: op('images.get', () => { throw hostError('not_found'); }) },
    };
  }
  ops(name) {
    return this.calls.filter((c) => c.op === name);
  }
  opNames() {
    return this.calls.map((c) => c.op);
  }
  settingsGet({ keys }) {
    const o = {};
    for (const k of keys) if (k in this.settings) o[k] = this.settings[k];
    return o;
  }
  /** The host's entryId of a stored entry (given on first sight). */
  idOf(e) {
    if (!this.ids.has(e)) this.ids.set(e, `e-${this.nextEntry++}`);
    return this.ids.get(e);
  }
  withId(e) {
    return { ...e, entryId: this.idOf(e) };
  }
  historyGet({ from = 0, limit } = {}) {
    const page = this.live.slice(from, limit === undefined ? undefined : from + limit).map((e) => this.withId(e));
    return { entries: page, from, length: this.live.length, offset: this.prefix.length, activeSessionId: this.binding };
  }
  historyMeta() {
    return { length: this.live.length, offset: this.prefix.length, activeSessionId: this.binding };
  }
  trim() {
    while (this.live.length > 60) this.prefix.push(this.live.shift());
  }
  /** A live chat of `entries`, kept in session `id` (as the host always has it). */
  seed(entries, id = 'sess-0') {
    this.live.push(...entries);
    this.binding = id;
    this.sessions.set(id, []);
  }
  /** Auto-keep: the first entry of an unbound live history starts a session. */
  keep() {
    if (this.binding) return null;
    this.binding = `sess-${this.nextSession++}`;
    this.sessions.set(this.binding, []);
    return { sessionId: this.binding, created: true };
  }
  /** `copyVideoSrc` as keepsake-host does it: the newest carrier of where the entry lands. */
  withVideoSrc(entry, copyVideoSrc, entries) {
    if (copyVideoSrc === undefined) return entry;
    if (!this.copiesVideoSrc || typeof copyVideoSrc !== 'boolean') throw hostError('bad_request');
    const v = copyVideoSrc && !entry.videoSrc ? newestVideoSrc(entries) : null;
    return v ? { ...entry, videoSrc: v } : entry;
  }
  historyAppend({ entry, markImagesSeen, copyVideoSrc }) {
    if (entry?.role !== 'user' && entry?.role !== 'assistant') throw hostError('bad_request');
    entry = this.withVideoSrc(entry, copyVideoSrc, this.live);
    const kept = this.keep();
    const last = this.live.at(-1);
    if (entry.role === 'assistant' && last?.role === 'user') delete last.failed; // a reply clears the mark
    this.live.push(entry);
    this.trim();
    if (markImagesSeen) this.markSeen();
    const r = { length: this.live.length, index: this.live.length - 1, sessionId: this.binding, entryId: this.idOf(entry) };
    return kept ? { ...r, kept, evicted: [] } : r;
  }
  branch({ index, entry }) {
    if (!Number.isInteger(index) || index < 0 || index >= this.live.length) throw hostError('bad_request');
    this.versions.push({ sessionId: this.binding, index, entries: this.live.splice(index) });
    this.live.push(entry);
    const count = this.versions.filter((v) => v.sessionId === this.binding && v.index === index).length + 1;
    return {
      length: this.live.length,
      index: this.live.length - 1,
      sessionId: this.binding,
      entryId: this.idOf(entry),
      forkEntryId: index > 0 ? this.idOf(this.live[index - 1]) : '',
      chosen: count,
      versions: count,
    };
  }
  markFailed({ entryId, code, message }) {
    const i = this.live.findIndex((e) => this.idOf(e) === entryId);
    if (i < 0) throw hostError('not_found');
    if (this.live[i].role !== 'user') throw hostError('bad_request');
    this.live[i].failed = { code, message, at: 0 };
    return { marked: true, index: i, at: 0 };
  }
  markSeen() {
    for (const e of this.live) if (bodyHasImages(e.content) && !e.imagesSeen) e.imagesSeen = true;
  }
  truncateFrom({ index }) {
    if (!Number.isInteger(index) || index < 0) throw hostError('bad_request');
    this.live.splice(index);
    if (this.live.length === 0) this.binding = '';
    return { length: this.live.length };
  }
  /** The live chat is always kept: write its session's body (prefix + window) for a switch. */
  persist() {
    if (this.binding) this.sessions.set(this.binding, [...this.prefix, ...this.live]);
  }
  save() {
    if (this.live.length === 0 || !this.binding) return null;
    this.persist();
    return { id: this.binding, created: false };
  }
  clear({ saveCurrent }) {
    const saved = saveCurrent ? this.save() : undefined;
    this.persist();
    this.live = [];
    this.prefix = [];
    this.binding = '';
    return saveCurrent ? { saved } : {};
  }
  load({ id, saveCurrent }) {
    if (!this.sessions.has(id)) throw hostError('not_found');
    const saved = saveCurrent ? this.save() : undefined;
    this.persist();
    const body = this.sessions.get(id);
    const cut = Math.max(0, body.length - 60);
    this.prefix = body.slice(0, cut);
    this.live = body.slice(cut);
    this.binding = id;
    return { length: this.live.length, offset: this.prefix.length, ...(saveCurrent ? { saved } : {}) };
  }
  appendTo({ id, entry, copyVideoSrc, markImagesSeen }) {
    if (!id) throw hostError('bad_request');
    if (id === this.binding || !this.sessions.has(id)) {
      const r = this.historyAppend({ entry, copyVideoSrc, markImagesSeen });
      return { target: 'live', ...r };
    }
    const body = this.sessions.get(id);
    const e = this.withVideoSrc(entry, copyVideoSrc, body);
    body.push(e);
    return { target: 'session', sessionId: id, length: body.length, index: body.length - 1, entryId: this.idOf(e) };
  }
  sessionGet({ id }) {
    if (id === this.binding) this.persist();
    if (!this.sessions.has(id)) throw hostError('not_found');
    return { id, name: id, createdAt: 0, pinned: false, entries: this.sessions.get(id).map((e) => this.withId(e)) };
  }
  attach({ ctx, videoSrc }) {
    const text = `${PREFIX}\nURL: ${ctx.url}\nTitle: ${ctx.title}\nMode: ${ctx.mode}\n---\n\n${ctx.body}`;
    const attachId = `att-${this.nextAttach++}`;
    const entry = { role: 'user', content: text, attachId, ...(videoSrc ? { videoSrc } : {}) };
    this.live.push(entry);
    this.trim();
    const needed = this.settings.autoSummarizeAttachments !== false && ctx.body.length > this.threshold;
    return {
      attachId,
      length: this.live.length,
      index: this.live.length - 1,
      summary: { needed, family: videoSrc ? 'video' : 'generic' },
    };
  }
  summaryPlan({ attachId }) {
    const e = this.live.find((x) => x.attachId === attachId);
    if (!e) throw hostError('not_found');
    const body = e.content.split('\n---\n\n').slice(1).join('\n---\n\n');
    const chunks = [];
    for (let i = 0; i < body.length; i += this.chunkSize) chunks.push(body.slice(i, i + this.chunkSize));
    return {
      needed: !e.summarized && body.length > this.threshold,
      family: e.videoSrc ? 'video' : 'generic',
      originalLength: body.length,
      chunks,
    };
  }
  applySummary({ attachId, summary }) {
    if (!summary?.trim()) throw hostError('bad_request');
    const e = this.live.find((x) => x.attachId === attachId);
    if (!e) return { applied: false };
    const head = e.content.split('\n---\n\n')[0];
    e.content = `${head}\n---\n\n[Keepsake: auto-condensed]\n\n${summary}`;
    e.summarized = true;
    return { applied: true };
  }
  build(a) {
    let hist = this.live;
    let source = 'live';
    if (a.source?.sessionId && this.sessions.has(a.source.sessionId)) {
      hist = this.sessions.get(a.source.sessionId);
      source = 'session';
    }
    // retry: the stored user entry at that index is the turn, the entries before it the history
    let turn = a.turn;
    let retried;
    if (a.retry != null) {
      const e = hist[a.retry];
      if (e?.role !== 'user') throw hostError('bad_request');
      turn = { userText: entryText(e), images: [] };
      retried = { index: a.retry, entryId: this.idOf(e) };
      hist = hist.slice(0, a.retry);
    }
    if (a.upTo != null) hist = hist.slice(0, a.upTo);
    const refs = a.imageRefs !== undefined && a.imageRefs !== false;
    const images = (turn?.images ?? []).map((u, i) =>
      refs && typeof u === 'string' && u.startsWith('data:image/') ? `keepsake-turn-image:${i}` : u,
    );
    const userText = turn?.userText || '(no instruction)';
    const userEntry = images.length
      ? { role: 'user', content: [{ type: 'text', text: userText }, ...images.map((url) => ({ type: 'image_url', image_url: { url } }))] }
      : { role: 'user', content: userText };
    let h = hist.filter((e) => e.role === 'user' || e.role === 'assistant').map((e) => ({ role: e.role, content: e.content }));
    let rescue;
    if (a.rescue) {
      const overflow = OVERFLOW.test(a.rescue.errorMessage ?? '');
      const changed = [];
      h = hist.map((e, i) => {
        if (overflow && isAttach(e) && attachTextOf(e).length >= 8000) {
          changed.push({ index: i, attachId: e.attachId ?? null });
          return { role: e.role, content: stubFor(e) };
        }
        return { role: e.role, content: e.content };
      });
      rescue = overflow
        ? changed.length
          ? { applied: true, changed }
          : { applied: false, reason: 'nothing_to_stub', changed }
        : { applied: false, reason: 'not_overflow', changed: [] };
    }
    const tail =
      a.pass?.kind === 'continuation'
        ? [userEntry, { role: 'assistant', content: a.pass.previousReply }, { role: 'user', content: a.pass.instruction }]
        : [userEntry];
    const body = {
      ...(a.bodyFields ?? {}),
      messages: [...(a.systemPrompt ? [{ role: 'system', content: a.systemPrompt }] : []), ...h, ...tail],
    };
    const out = { body, userEntry, droppedImages: 0, source };
    if (retried) out.retry = retried;
    if (rescue) out.rescue = rescue;
    if (refs) out.imageRefs = [...collectTokens(body), ...collectTokens(userEntry)].filter((v, i, l) => l.indexOf(v) === i);
    return out;
  }
  commitRescue({ attachIds, sessionId }) {
    const list = sessionId && this.sessions.has(sessionId) && sessionId !== this.binding ? this.sessions.get(sessionId) : this.live;
    let committed = 0;
    for (const e of list) {
      if (attachIds.includes(e.attachId) && isAttach(e) && attachTextOf(e).length >= 8000) {
        e.content = stubFor(e);
        committed++;
      }
    }
    return { committed };
  }
}

// ---------------------------------------------------------------------------------------------
// Fake llm: a script of steps, one per streamReply call.

function createFakeLlm(script) {
  const calls = [];
  return {
    calls,
    async streamReply(opts) {
      const step = script.shift();
      if (!step) throw new Error('unexpected llm call');
      // `body` as the provider gets it, whether turns.js passed the object or the host's text
      calls.push(typeof opts.bodyText === 'string' ? { ...opts, body: JSON.parse(opts.bodyText) } : opts);
      return step(opts);
    },
  };
}
const reply =
  (deltas, finishReason = 'stop') =>
  async ({ onDelta }) => {
    for (const d of deltas) {
      await tick();
      onDelta(d);
    }
    return { text: deltas.join(''), finishReason, truncated: false };
  };
const failWith = (err) => async () => {
  await tick();
  throw err;
};
/** The provider answers with an HTTP error before any text. */
const httpError = (status, message) => failWith(llmError('http', message, { status }));
/** Streams `deltas`, then waits for the abort signal (→ aborted error) or `until` (→ finish). */
const hang =
  (deltas, { until, then = [], finishReason = 'stop' } = {}) =>
  async ({ onDelta, signal }) => {
    let text = '';
    for (const d of deltas) {
      await tick();
      onDelta(d);
      text += d;
    }
    const aborted = new Promise((_, rej) => {
      const fire = () => rej(llmError('aborted', 'The request was aborted', { partial: text }));
      if (signal.aborted) fire();
      else signal.addEventListener('abort', fire, { once: true });
    });
    if (!until) return aborted;
    await Promise.race([until, aborted]);
    for (const d of then) {
      await tick();
      onDelta(d);
      text += d;
    }
    return { text, finishReason, truncated: false };
  };

const PROVIDERS = {
  providers: [
    { id: 'p1', name: 'OpenAI', kind: 'chat', baseUrl: 'https://api.example/v1', apiKey: 'k', model: 'gpt-x' },
    { id: 'p2', name: 'Claude', kind: 'anthropic', baseUrl: 'https://api.anthropic.example', apiKey: 'k2', model: 'c-3' },
  ],
  activeProvider: 'p1',
  activeModel: 'gpt-x',
  systemPrompt: 'Be brief.',
};

function setup({ script = [], settings = PROVIDERS, host: hostOpts = {}, chrome, deps = {} } = {}) {
  const host = new FakeHost({ settings: clone(settings), ...hostOpts });
  const llm = createFakeLlm(script);
  const events = [];
  let n = 0;
  const turns = createTurns({
    storage: host.storage,
    llm,
    broadcast: (e) => events.push(clone(e)),
    chrome: chrome ?? {},
    now: () => 1_700_000_000_000,
    newId: () => `stream-${++n}`,
    ...deps,
  });
  return { host, llm, events, turns, types: () => events.map((e) => e.type) };
}

// ---------------------------------------------------------------------------------------------
// Pure helpers

describe('pure helpers', () => {
  test('findUserEntryIndex', () => {
    const entries = [
      { role: 'user', content: 'q' },
      { role: 'user', content: `${PREFIX}\nURL: u`, videoSrc: { platform: 'youtube', url: 'u', tabId: 1 } },
      { role: 'assistant', content: 'a', videoSrc: { platform: 'html5', url: 'v', tabId: 2 } },
      { role: 'user', content: [{ type: 'text', text: 'q' }, { type: 'image_url', image_url: { url: 'x' } }] },
    ];
    assert.equal(findUserEntryIndex(entries, 'q', 3), 3);
    assert.equal(findUserEntryIndex(entries, 'q', 1), 3);
    assert.equal(findUserEntryIndex(entries.slice(0, 3), 'q', 5), 0);
    assert.equal(findUserEntryIndex(entries, 'nope', 0), -1);
  });
});

// ---------------------------------------------------------------------------------------------
// Request bodies as deltas (PROTOCOL.md "Body deltas")

const sha256 = (t) => createHash('sha256').update(t, 'utf8').digest('hex');

/** Deterministic prose with CJK, accents, astral emoji, quotes and newlines. */
function prose(seed, chars) {
  const words = ['lorem', 'ipsum', 'dolor', '会话', '记录', 'naïve', 'café', '😀', '🚀x', '"quoted"', 'line\nbreak'];
  let x = seed * 2654435761 + 1;
  let out = '';
  while (out.length < chars) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out += words[x % words.length] + ' ';
  }
  return out;
}

/**
 * Gives a FakeHost the text forms of request.build: bodies held by hash, a common
 * prefix/suffix delta against `since` when held. `tamper(out)` corrupts the next delta.
 */
function speakDeltas(host) {
  const held = new Map();
  const plain = host.storage.request.build;
  host.textReplies = [];
  host.tamper = null;
  host.storage.request.build = async (args) => {
    const r = await plain(args);
    if (args.since === undefined) return r;
    const { body, ...fields } = r;
    const text = JSON.stringify(body);
    const out = { bodyHash: sha256(text), bodyLength: text.length, ...fields };
    const old = held.get(args.since);
    if (old === undefined) {
      out.bodyText = text;
    } else {
      let p = 0;
      while (p < old.length && p < text.length && old[p] === text[p]) p++;
      let q = 0;
      while (q < old.length - p && q < text.length - p && old[old.length - 1 - q] === text[text.length - 1 - q]) q++;
      const ops = [];
      if (p) ops.push([0, p]);
      if (text.length - q > p) ops.push(text.slice(p, text.length - q));
      if (q) ops.push([old.length - q, old.length]);
      out.bodyDelta = { since: args.since, ops };
      if (host.tamper) {
        host.tamper(out);
        host.tamper = null;
      }
    }
    held.set(out.bodyHash, text);
    host.textReplies.push(out);
    return out;
  };
  return host;
}

describe('request bodies as deltas', () => {
  test('the second send names the held body and receives a delta; the model gets the same body', async () => {
    const memory = new BodyMemory();
    const { host, llm, turns } = setup({ script: [reply(['A1']), reply(['A2'])], deps: { bodyMemory: memory } });
    speakDeltas(host);
    host.live.push({ role: 'user', content: prose(1, 3000) }, { role: 'assistant', content: prose(2, 3000) });
    await turns.send({ text: 'q1' });
    await turns.idle();
    await turns.send({ text: 'q2 😀' });
    await turns.idle();
    const builds = host.ops('request.build');
    assert.equal(builds.length, 2);
    assert.equal(builds[0].args.since, '');
    assert.equal(builds[1].args.since, host.textReplies[0].bodyHash);
    assert.deepEqual(builds[1].args.imageRefs, []);
    assert.ok(host.textReplies[1].bodyDelta, 'the second body travelled as a delta');
    const size = JSON.stringify(host.textReplies[1]).length;
    assert.ok(size < 500 && size < host.textReplies[0].bodyText.length / 10, `delta reply ${size} chars`);
    // the host's text went to the provider as it came
    assert.equal(llm.calls[1].bodyText, memory.text);
    const sent = llm.calls[1].body.messages.map((m) => m.content);
    assert.deepEqual(sent, ['Be brief.', prose(1, 3000), prose(2, 3000), 'q1', 'A1', 'q2 😀']);
    assert.deepEqual(memory.stats, { full: 1, delta: 1, rejected: 0 });
    assert.equal(memory.hash, host.textReplies[1].bodyHash);
    assert.equal(sha256(memory.text), memory.hash, 'the held text is the one the host hashed');
  });

  test('a delta whose hash does not match: the body is rebuilt whole after the append, before the model call', async () => {
    const memory = new BodyMemory();
    const { host, llm, turns } = setup({ script: [reply(['A1']), reply(['A2'])], deps: { bodyMemory: memory } });
    speakDeltas(host);
    await turns.send({ text: 'q1' });
    await turns.idle();
    host.tamper = (out) => {
      out.bodyHash = 'f'.repeat(64); // the splice applies and parses, its hash does not match
    };
    await turns.send({ text: 'q2' });
    await turns.idle();
    const builds = host.ops('request.build');
    assert.deepEqual(builds.map((b) => b.args.since), ['', host.textReplies[0].bodyHash, '']);
    assert.equal(builds[2].args.upTo, 2, 'rebuilt up to the appended user entry');
    assert.equal(llm.calls.length, 2, 'the unverified body never reached the model');
    assert.deepEqual(llm.calls[1].body.messages.map((m) => m.content), ['Be brief.', 'q1', 'A1', 'q2']);
    assert.deepEqual(host.live.map((e) => e.content), ['q1', 'A1', 'q2', 'A2'], 'the user entry went in once');
    assert.deepEqual(memory.stats, { full: 2, delta: 1, rejected: 1 });
  });

  test('a spliced text that is not even JSON never reaches the model: the hash check sends a full build', async () => {
    const memory = new BodyMemory();
    const { host, llm, turns } = setup({ script: [reply(['A1']), reply(['A2'])], deps: { bodyMemory: memory } });
    speakDeltas(host);
    await turns.send({ text: 'q1' });
    await turns.idle();
    host.tamper = (out) => {
      out.bodyDelta.ops = [[0, 3], 'garbage', ...out.bodyDelta.ops.slice(1)];
      out.bodyLength = out.bodyDelta.ops.reduce((n, o) => n + (typeof o === 'string' ? o.length : o[1] - o[0]), 0);
    };
    await turns.send({ text: 'q2' });
    await turns.idle();
    const builds = host.ops('request.build');
    // the text goes to the provider unparsed, so only the hash stands between it and the model
    assert.deepEqual(builds.map((b) => [b.args.since === '' ? 'full' : 'delta', b.args.upTo]), [
      ['full', undefined],
      ['delta', undefined],
      ['full', 2],
    ]);
    assert.equal(llm.calls.length, 2);
    assert.ok(!llm.calls[1].bodyText.includes('garbage'));
    assert.deepEqual(llm.calls[1].body.messages.map((m) => m.content), ['Be brief.', 'q1', 'A1', 'q2']);
    assert.deepEqual(host.live.map((e) => e.content), ['q1', 'A1', 'q2', 'A2'], 'the user entry went in once');
    assert.deepEqual(memory.stats, { full: 2, delta: 1, rejected: 1 });
  });

  test('a delta that does not apply → one full build at once; a rescue rebuild checks its delta inline', async () => {
    const memory = new BodyMemory();
    const { host, llm, turns } = setup({
      script: [
        reply(['A1']),
        failWith(llmError('http', "This model's maximum context length is 8192 tokens", { status: 400 })),
        reply(['A2']),
      ],
      deps: { bodyMemory: memory },
    });
    speakDeltas(host);
    host.live.push({ role: 'user', content: `${PREFIX}\nTitle: Big\nURL: https://big/\n---\n\n${'x'.repeat(9000)}`, attachId: 'big-1' });
    await turns.send({ text: 'q1' });
    await turns.idle();
    host.tamper = (out) => {
      out.bodyDelta.ops.push([0, 10 ** 9]);
    };
    await turns.send({ text: 'q2' });
    await turns.idle();
    const builds = host.ops('request.build');
    assert.deepEqual(
      builds.map((b) => [b.args.since === '' ? 'full' : 'delta', b.args.rescue ? 'rescue' : '']),
      [['full', ''], ['delta', ''], ['full', ''], ['delta', 'rescue']],
    );
    assert.ok(host.textReplies[3].bodyDelta, 'the rescue body travelled as a delta');
    assert.ok(JSON.stringify(llm.calls[2].body).includes('too large for the model'));
    assert.equal(llm.calls[2].body.messages.filter((m) => m.role === 'user').length, 3, 'no duplicated turn');
    assert.deepEqual(memory.stats, { full: 2, delta: 1, rejected: 1 });
  });

  test('a bad_request from request.build fails the turn (no second build); no digest → no since', async () => {
    const { host, llm, turns } = setup({ script: [reply(['A1'])] });
    const plain = host.storage.request.build;
    host.storage.request.build = async (args) => {
      await plain(args);
      throw hostError('bad_request', 'unknown argument "since"');
    };
    await turns.send({ text: 'q1' }).catch(() => {});
    await turns.idle();
    const builds = host.ops('request.build');
    assert.equal(builds.length, 1, 'no retry without since or imageRefs');
    assert.equal(builds[0].args.since, '');
    assert.equal(llm.calls.length, 0, 'nothing was sent to the model');

    const off = setup({ script: [reply(['A1'])], deps: { bodyMemory: new BodyMemory({ subtle: null }) } });
    await off.turns.send({ text: 'q1' });
    await off.turns.idle();
    assert.equal('since' in off.host.ops('request.build')[0].args, false);
  });

});

// ---------------------------------------------------------------------------------------------
// Turns against the fake host

describe('chat.send', () => {
  test('happy path: user entry stored before chat.start, reply after, events in order', async () => {
    const { host, llm, events, turns, types } = setup({ script: [reply(['Hel', 'lo ', '\n'])] });
    let liveAtStart;
    host.onCall = () => {
      if (liveAtStart === undefined && events.some((e) => e.type === 'chat.start')) liveAtStart = clone(host.live);
    };
    host.live.push({ role: 'user', content: `${PREFIX}\nURL: v\n---\n\nx`, attachId: 'a0', videoSrc: { platform: 'youtube', url: 'v', tabId: 3 } });
    const r = await turns.send({ text: 'hi', images: [png(RED)] });
    liveAtStart ??= clone(host.live);
    // the first entry started a kept chat: its session is where the reply goes
    assert.deepEqual(r, {
      streamId: 'stream-1',
      userIndex: 1,
      length: 2,
      droppedImages: 0,
      sessionId: 'sess-1',
      kept: { sessionId: 'sess-1', created: true },
      evicted: [],
    });
    await turns.idle();

    // when chat.start went out, the user entry was stored, once, with the image bytes filled in
    assert.equal(liveAtStart.length, 2);
    assert.deepEqual(liveAtStart[1], {
      role: 'user',
      content: [{ type: 'text', text: 'hi' }, { type: 'image_url', image_url: { url: png(RED) } }],
    });
    // the build asked for image references; the body sent had no tokens left
    const build = host.ops('request.build')[0].args;
    assert.deepEqual(build.imageRefs, []);
    assert.equal(build.systemPrompt, 'Be brief.');
    assert.deepEqual(build.bodyFields, { model: 'gpt-x', stream: true });
    assert.deepEqual(build.turn, { userText: 'hi', images: [png(RED)] });
    assert.equal(collectTokens(llm.calls[0].body).size, 0);
    assert.equal(llm.calls[0].body.messages.at(-1).content[1].image_url.url, png(RED));
    assert.deepEqual(llm.calls[0].provider, { kind: 'chat', baseUrl: 'https://api.example/v1', apiKey: 'k', model: 'gpt-x' });

    // one assistant entry, stamped, videoSrc copied from the newest entry carrying one
    assert.equal(host.live.length, 3);
    assert.deepEqual(host.live[2], {
      role: 'assistant',
      content: 'Hello',
      providerLabel: 'OpenAI · gpt-x',
      providerKey: { name: 'OpenAI', model: 'gpt-x', id: 'p1' },
      videoSrc: { platform: 'youtube', url: 'v', tabId: 3 },
    });
    assert.equal(host.ops('history.append').length, 1, 'the user entry');
    // the reply goes to the session the turn was sent in (here the live chat's)
    const replies = host.ops('sessions.appendTo');
    assert.equal(replies.length, 1);
    assert.equal(replies[0].args.id, 'sess-1');
    assert.equal(replies[0].args.markImagesSeen, true, 'the turn carried images');
    assert.equal(replies[0].args.copyVideoSrc, true, 'the host copies videoSrc');
    assert.equal(host.ops('history.get').length, 0, 'no read of the history for it');
    assert.equal(host.live[1].imagesSeen, true);

    // chat.start, the deltas (those that came before it joined into one), chat.done
    assert.equal(types()[0], 'chat.start');
    assert.deepEqual(events[0], { type: 'chat.start', streamId: 'stream-1', userIndex: 1 });
    const deltas = events.slice(1, -1);
    assert.ok(deltas.length >= 1 && deltas.every((e) => e.type === 'chat.delta' && e.streamId === 'stream-1'));
    assert.equal(deltas.map((e) => e.delta).join(''), 'Hello \n');
    assert.deepEqual(
      deltas.map((e) => e.length),
      deltas.map((_, i) => deltas.slice(0, i + 1).map((e) => e.delta).join('').length),
    );
    assert.deepEqual(events.at(-1), { type: 'chat.done', streamId: 'stream-1', index: 2, length: 3, finishReason: 'stop', target: 'live' });
    assert.deepEqual(turns.state(), { stream: null, background: [] });
  });

  test('no images anywhere → no markImagesSeen; choice block stripped', async () => {
    const { host, turns } = setup({ script: [reply(['Pick one.\n```choices\n["a"]\n```'])] });
    await turns.send({ text: 'q' });
    await turns.idle();
    const last = host.ops('history.append').at(-1).args;
    assert.equal(last.markImagesSeen, undefined);
    assert.equal(host.live[1].content, 'Pick one.');
  });

  test('anthropic: max_tokens in bodyFields', async () => {
    const { host, turns } = setup({ script: [reply(['ok'])], settings: { ...PROVIDERS, activeProvider: 'p2', activeModel: '' } });
    await turns.send({ text: 'q' });
    await turns.idle();
    assert.deepEqual(host.ops('request.build')[0].args.bodyFields, { model: 'c-3', stream: true, max_tokens: 4096 });
    assert.equal(host.live[1].providerLabel, 'Claude · c-3');
  });

  test('a second send while streaming is busy', async () => {
    const g = gate();
    const { llm, turns } = setup({ script: [hang(['a'], { until: g.promise })] });
    await turns.send({ text: 'one' });
    await assert.rejects(turns.send({ text: 'two' }), { code: 'busy' });
    g.open();
    await turns.idle();
    assert.equal(llm.calls.length, 1);
  });

  test('the provider is called while the user entry is appended; nothing shows before it is stored', async () => {
    const appendGate = gate();
    const { host, llm, events, turns, types } = setup({ script: [reply(['Hel', 'lo'])] });
    host.hold['history.append'] = appendGate.promise;
    const sending = turns.send({ text: 'hi' });
    for (let i = 0; i < 50 && llm.calls.length === 0; i++) await tick();
    assert.equal(llm.calls.length, 1, 'the provider call went out while the append was held');
    for (let i = 0; i < 10; i++) await tick(); // the whole reply streams in meanwhile
    assert.equal(host.live.length, 0, 'the append is still held');
    assert.deepEqual(events, [], 'no event before the user entry is stored');
    assert.deepEqual(turns.state(), { stream: null, background: [] });
    assert.equal(llm.calls[0].body.messages.at(-1).content, 'hi');
    appendGate.open();
    const r = await sending;
    await turns.idle();
    assert.equal(r.userIndex, 0);
    assert.deepEqual(types(), ['chat.start', 'chat.delta', 'chat.done']);
    assert.deepEqual(events[1], { type: 'chat.delta', streamId: 'stream-1', delta: 'Hello', length: 5 });
    assert.deepEqual(host.live.map((e) => [e.role, e.content]), [
      ['user', 'hi'],
      ['assistant', 'Hello'],
    ]);
  });

  test('a failed append: the send fails, the provider call that went out is aborted, nothing shown or stored', async () => {
    const appendGate = gate();
    const { host, llm, events, turns } = setup({ script: [hang(['partial text'])] });
    host.hold['history.append'] = appendGate.promise;
    host.fail['history.append'] = hostError('host_exited');
    const sending = turns.send({ text: 'three' });
    for (let i = 0; i < 50 && llm.calls.length === 0; i++) await tick();
    assert.equal(llm.calls.length, 1, 'the provider call went out while the append was held');
    appendGate.open();
    await assert.rejects(sending, { code: 'host_exited' });
    assert.equal(llm.calls[0].signal.aborted, true);
    await turns.idle();
    assert.deepEqual(events, []);
    assert.deepEqual(host.live, []);
    assert.equal(host.ops('history.append').length, 1, 'no salvage of the partial reply');
    assert.deepEqual(turns.state(), { stream: null, background: [] });
  });

  test('no provider → error before anything is written', async () => {
    const { host, turns } = setup({ settings: {} });
    await assert.rejects(turns.send({ text: 'x' }), { code: 'no_provider' });
    assert.equal(host.ops('history.append').length, 0);
  });
});

/** The NativePort's event side: `on(name, fn)`, and `emit` for the test. */
function fakeEvents() {
  const listeners = new Map();
  return {
    on(name, fn) {
      if (!listeners.has(name)) listeners.set(name, new Set());
      listeners.get(name).add(fn);
      return () => listeners.get(name).delete(fn);
    },
    emit(name, payload) {
      for (const fn of listeners.get(name) ?? []) fn(payload);
    },
  };
}

describe('turn settings kept between sends', () => {
  test('read once; read again after a settings change or a new connection, not after other changes', async () => {
    const events = fakeEvents();
    const { host, turns } = setup({ script: [reply(['a']), reply(['b']), reply(['c']), reply(['d']), reply(['e'])], deps: { events } });
    const send = async (text) => {
      await turns.send({ text });
      await turns.idle();
    };
    const reads = () => host.ops('settings.get').length;
    await send('1');
    await send('2');
    assert.equal(reads(), 1);
    assert.deepEqual(host.ops('settings.get')[0].args, { keys: [...TURN_SETTING_KEYS] });
    events.emit('changed', { event: 'changed', seq: 7, areas: { history: true, sessions: { index: true } } });
    await send('3');
    assert.equal(reads(), 1, 'a change without settings keeps them');
    // the user picks the other provider: the next send uses it
    host.settings.activeProvider = 'p2';
    host.settings.activeModel = '';
    events.emit('changed', { event: 'changed', seq: 8, areas: { settings: ['activeProvider', 'activeModel'] } });
    await send('4');
    assert.equal(reads(), 2);
    assert.equal(host.live.at(-1).providerLabel, 'Claude · c-3');
    events.emit('state', 'connecting');
    await send('5');
    assert.equal(reads(), 3);
  });

  test('a settings write the worker relays forgets them before its reply, event or not', async () => {
    const events = fakeEvents();
    const { host, turns } = setup({ script: [reply(['a']), reply(['b']), reply(['c'])], deps: { events } });
    const send = async (text) => {
      await turns.send({ text });
      await turns.idle();
    };
    await send('1');
    // a page's other calls keep them
    turns.relayed('history.get', Promise.resolve([]));
    const failed = Promise.reject(new Error('x'));
    failed.catch(() => {}); // the page gets this rejection (sw.js)
    turns.relayed('sessions.list', failed);
    await tick();
    await send('2');
    assert.equal(host.ops('settings.get').length, 1);
    // the options page switches provider; its `changed` event has not reached the worker yet
    let answer;
    const write = new Promise((resolve) => {
      answer = resolve;
    });
    turns.relayed('settings.set', write);
    host.settings.activeProvider = 'p2';
    host.settings.activeModel = '';
    answer({});
    await write;
    await send('3');
    assert.equal(host.ops('settings.get').length, 2);
    assert.equal(host.live.at(-1).providerLabel, 'Claude · c-3');
  });

  test('a restore (areas.restored) forgets the turn settings and the last body; other changes keep the body', async () => {
    const events = fakeEvents();
    const memory = new BodyMemory();
    const { host, turns } = setup({ script: [reply(['a']), reply(['b']), reply(['c']), reply(['d'])], deps: { events, bodyMemory: memory } });
    speakDeltas(host);
    const send = async (text) => {
      await turns.send({ text });
      await turns.idle();
    };
    await send('1');
    events.emit('changed', { event: 'changed', seq: 4, areas: { history: true, sessions: { ids: ['s1'] } } });
    await send('2');
    assert.equal(host.ops('settings.get').length, 1, 'kept across an ordinary change');
    assert.notEqual(host.ops('request.build').at(-1).args.since, '', 'the body too');
    // yesterday's database is put back: its provider is another one
    host.settings.activeProvider = 'p2';
    host.settings.activeModel = '';
    events.emit('changed', { event: 'changed', seq: 9, areas: { restored: true } });
    assert.equal(memory.hash, null, 'the held body is gone at once');
    await send('3');
    assert.equal(host.ops('settings.get').length, 2, 'the settings are read again');
    assert.equal(host.ops('request.build').at(-1).args.since, '', 'one full body');
    assert.equal(host.live.at(-1).providerLabel, 'Claude · c-3', 'the restored settings are used');
    // a restore relayed for a page forgets the settings before its reply, event or not
    turns.relayed('backups.restore', Promise.resolve({ restored: 'x', undo: 'y' }));
    await tick();
    await send('4');
    assert.equal(host.ops('settings.get').length, 3);
  });

  test('a read that a change overtook is not kept', async () => {
    const events = fakeEvents();
    const stored = { activeProvider: 'p1' };
    let reads = 0;
    let held = null;
    // the host answers from what is stored when the read runs; the reply may reach the worker later
    const memory = new SettingsMemory(async () => {
      reads++;
      const answer = { ...stored };
      if (held) await held.promise;
      return answer;
    }, events);
    held = gate();
    const first = memory.get();
    await tick();
    stored.activeProvider = 'p2';
    events.emit('changed', { event: 'changed', seq: 9, areas: { settings: ['activeProvider'] } });
    held.open();
    held = null;
    assert.equal((await first).activeProvider, 'p1', 'that read still answers its caller');
    assert.equal((await memory.get()).activeProvider, 'p2');
    assert.equal((await memory.get()).activeProvider, 'p2');
    assert.equal(reads, 2);
  });

  test('without events every send reads the settings', async () => {
    const { host, turns } = setup({ script: [reply(['a']), reply(['b'])] });
    for (const text of ['1', '2']) {
      await turns.send({ text });
      await turns.idle();
    }
    assert.equal(host.ops('settings.get').length, 2);
  });
});

describe('abort salvage', () => {
  test('stop → the trimmed partial is appended with interrupted: true', async () => {
    const { host, events, turns } = setup({ script: [hang(['  Partial ', 'text\n'])] });
    const { streamId } = await turns.send({ text: 'q', images: [png(RED)] });
    while (!events.some((e) => e.type === 'chat.delta' && e.length === 15)) await tick();
    assert.equal(turns.state().stream.text, '  Partial text\n');
    const r = await turns.stop({ streamId });
    assert.deepEqual(r, { stopped: true, salvagedIndex: 1 });
    assert.deepEqual(host.live[1], {
      role: 'assistant',
      content: 'Partial text',
      interrupted: true,
      providerLabel: 'OpenAI · gpt-x',
      providerKey: { name: 'OpenAI', model: 'gpt-x', id: 'p1' },
    });
    const salvage = host.ops('history.append').at(-1).args;
    assert.equal(salvage.markImagesSeen, undefined, 'never stamped after an abort');
    assert.equal(host.live[0].imagesSeen, undefined);
    const err = events.at(-1);
    assert.equal(err.type, 'chat.error');
    assert.equal(err.salvagedIndex, 1);
    assert.equal(err.error.code, 'stopped');
    assert.equal(err.error.kind, 'aborted');
    assert.deepEqual(await turns.stop({ streamId }), { stopped: false });
  });

  test('blank partial → nothing appended', async () => {
    const { host, events, turns } = setup({ script: [hang([' ', '\n'])] });
    const { streamId } = await turns.send({ text: 'q' });
    while (!events.some((e) => e.type === 'chat.delta' && e.length === 2)) await tick();
    assert.deepEqual(await turns.stop({ streamId }), { stopped: true, salvagedIndex: null });
    assert.equal(host.live.length, 1);
    assert.equal(host.ops('history.append').length, 1);
    assert.deepEqual(events.at(-1).salvagedIndex, null);
  });

  test('a stream that ends before the terminal event is salvaged as interrupted', async () => {
    const { host, events, turns } = setup({ script: [async ({ onDelta }) => (onDelta('cut off'), { text: 'cut off', finishReason: 'other', truncated: true })] });
    await turns.send({ text: 'q', images: [png(RED)] });
    await turns.idle();
    assert.equal(host.live[1].interrupted, true);
    assert.equal(host.live[0].imagesSeen, undefined);
    assert.equal(events.at(-1).error.code, 'truncated');
    assert.equal(events.at(-1).salvagedIndex, 1);
  });

  test('idle timeout / network error with text → salvaged; http error without text → nothing', async () => {
    const idle = async ({ onDelta }) => {
      onDelta('half an answer');
      throw llmError('idle', 'No data for 60 s', { partial: 'half an answer' });
    };
    const { host, events, turns } = setup({
      script: [idle, failWith(llmError('http', 'Internal Server Error', { status: 500 }))],
    });
    await turns.send({ text: 'q' });
    await turns.idle();
    assert.equal(host.live[1].interrupted, true);
    assert.equal(host.live[1].content, 'half an answer');
    assert.equal(events.at(-1).error.code, 'idle');
    await turns.send({ text: 'again' });
    await turns.idle();
    assert.equal(host.live.length, 3, 'only the user entry');
    assert.deepEqual(events.at(-1).error, { code: 'http_500', message: 'Internal Server Error', kind: 'http', status: 500 });
    assert.equal(host.ops('request.isContextOverflow').length, 1, 'checked, not an overflow');
    assert.equal(host.ops('request.build').length, 2, 'no rescue rebuild');
  });
});

describe('overflow rescue', () => {
  const big = `${PREFIX}\nURL: https://big\nTitle: Big\nMode: full\n---\n\n${'x'.repeat(9000)}`;

  test('overflow → one rescue rebuild → success → commitRescue', async () => {
    const { host, llm, events, turns } = setup({
      script: [failWith(llmError('http', "This model's maximum context length is 8192 tokens", { status: 400 })), reply(['Fine'])],
    });
    host.live.push({ role: 'user', content: big, attachId: 'big-1' }, { role: 'assistant', content: 'seen' });
    const { streamId, userIndex } = await turns.send({ text: 'q' });
    await turns.idle();
    const builds = host.ops('request.build');
    assert.equal(builds.length, 2);
    assert.deepEqual(builds[1].args.rescue, { errorMessage: "This model's maximum context length is 8192 tokens" });
    assert.equal(builds[1].args.upTo, userIndex);
    assert.ok(llm.calls[1].body.messages[1].content.includes('too large for the model'));
    assert.equal(llm.calls[1].body.messages.filter((m) => m.content === 'q').length, 1, 'the turn is not duplicated');
    assert.deepEqual(
      events.find((e) => e.type === 'chat.progress'),
      { type: 'chat.progress', streamId, stage: 'rescue', done: 0, total: 1 },
    );
    const names = host.opNames();
    assert.ok(names.lastIndexOf('request.commitRescue') > names.lastIndexOf('history.append'), 'committed after the reply');
    assert.deepEqual(host.ops('request.commitRescue')[0].args, { attachIds: ['big-1'] });
    assert.ok(host.live[0].content.includes('too large for the model'));
    assert.equal(host.live.at(-1).content, 'Fine');
    assert.equal(events.at(-1).type, 'chat.done');
  });

  test('at most one rescue per turn; a failed retry shows the original error and commits nothing', async () => {
    const first = llmError('http', 'prompt is too long: 300000 tokens', { status: 400 });
    const { host, llm, events, turns } = setup({
      script: [failWith(first), failWith(llmError('http', 'prompt is too long again', { status: 400 }))],
    });
    host.live.push({ role: 'user', content: big, attachId: 'big-1' });
    await turns.send({ text: 'q' });
    await turns.idle();
    assert.equal(llm.calls.length, 2);
    assert.equal(host.ops('request.build').length, 2);
    assert.equal(host.ops('request.commitRescue').length, 0);
    assert.equal(events.at(-1).error.message, first.message);
    assert.equal(host.live.length, 2);
    assert.equal(host.live[0].content, big);
  });

  test('rescue not applicable (nothing to stub) → the error is shown', async () => {
    const { host, llm, events, turns } = setup({ script: [failWith(llmError('http', 'context_length_exceeded', { status: 400 }))] });
    await turns.send({ text: 'q' });
    await turns.idle();
    assert.equal(llm.calls.length, 1);
    assert.equal(host.ops('request.build').length, 2);
    assert.equal(events.at(-1).error.code, 'http_400');
  });
});

describe('continuation', () => {
  test('finishReason length → one continuation pass, combined text appended once', async () => {
    const { host, llm, events, turns } = setup({
      script: [reply(['Part one'], 'length'), reply([' and two'], 'length')],
    });
    const { userIndex } = await turns.send({ text: 'long please' });
    await turns.idle();
    assert.equal(llm.calls.length, 2, 'at most one continuation');
    const b = host.ops('request.build')[1].args;
    assert.equal(b.pass.kind, 'continuation');
    assert.equal(b.pass.previousReply, 'Part one');
    assert.equal(b.upTo, userIndex);
    assert.equal(host.live.length, 2);
    assert.equal(host.live[1].content, 'Part one and two');
    assert.ok(events.some((e) => e.type === 'chat.progress' && e.stage === 'continuation'));
    assert.equal(events.at(-1).finishReason, 'length');
    assert.equal(events.filter((e) => e.type === 'chat.delta').at(-1).length, 'Part one and two'.length);
  });

  test('a failing continuation keeps the first part', async () => {
    const { host, turns } = setup({
      script: [reply(['Part one'], 'length'), failWith(llmError('http', 'Bad gateway', { status: 502 }))],
    });
    await turns.send({ text: 'q' });
    await turns.idle();
    assert.equal(host.live[1].content, 'Part one');
    assert.equal(host.live[1].interrupted, undefined);
  });
});

describe('sessions and background streams', () => {
  test('load during a stream hands it off; the reply goes to sessions.appendTo(origin)', async () => {
    const g = gate();
    const { host, events, turns } = setup({ script: [hang(['A'], { until: g.promise, then: ['B'] })] });
    host.sessions.set('S', [{ role: 'user', content: 'other' }]);
    const { streamId } = await turns.send({ text: 'q' });
    while (!events.some((e) => e.type === 'chat.delta')) await tick();
    const r = await turns.loadSession({ id: 'S' });
    assert.deepEqual(r.saved, { id: 'sess-1', created: false }, 'the chat was kept from its first entry');
    assert.equal(r.handedOff, streamId);
    assert.equal(r.stream, null);
    assert.deepEqual(host.ops('sessions.load')[0].args, { id: 'S', saveCurrent: true });
    assert.equal(turns.state().stream, null);
    assert.equal(turns.state().background[0].originSessionId, 'sess-1');
    assert.equal(turns.state().background[0].bg, true);
    const seen = events.length;
    g.open();
    await turns.idle();
    assert.equal(events.length, seen, 'no delta/done pushed for a background stream');
    assert.deepEqual(host.ops('sessions.appendTo')[0].args.id, 'sess-1');
    assert.deepEqual(host.sessions.get('sess-1').map((e) => e.content), ['q', 'AB']);
    assert.deepEqual(host.live, [{ role: 'user', content: 'other' }], 'the loaded session is untouched');
    assert.equal(host.ops('history.append').length, 1);
  });

  test('a background stream that is stopped is salvaged into its origin session', async () => {
    const { host, events, turns } = setup({ script: [hang(['partial'])] });
    const { streamId } = await turns.send({ text: 'q' });
    while (!events.some((e) => e.type === 'chat.delta')) await tick();
    await turns.newSession();
    assert.deepEqual(host.ops('history.clear')[0].args, { saveCurrent: true });
    const r = await turns.stop({ streamId });
    assert.deepEqual(r, { stopped: true, salvagedIndex: 1 });
    assert.deepEqual(host.sessions.get('sess-1')[1].interrupted, true);
    assert.equal(host.live.length, 0);
  });

  test('loading the origin session again re-attaches the stream', async () => {
    const g = gate();
    const { host, events, turns } = setup({ script: [hang(['A'], { until: g.promise, then: ['B'] })] });
    host.sessions.set('S', [{ role: 'user', content: 'other' }]);
    const { streamId } = await turns.send({ text: 'q' });
    while (!events.some((e) => e.type === 'chat.delta')) await tick();
    await turns.loadSession({ id: 'S' });
    const back = await turns.loadSession({ id: 'sess-1' });
    assert.equal(back.stream.streamId, streamId);
    assert.equal(back.stream.bg, false);
    assert.equal(turns.state().stream.streamId, streamId);
    g.open();
    await turns.idle();
    assert.equal(events.at(-1).type, 'chat.done');
    assert.deepEqual(host.live.map((e) => e.content), ['q', 'AB']);
    assert.equal(host.binding, 'sess-1');
  });

  test('loading the bound session itself keeps the stream in view', async () => {
    const g = gate();
    const { host, events, turns } = setup({ script: [hang(['A'], { until: g.promise, then: ['B'] })] });
    host.sessions.set('S', [{ role: 'user', content: 'first' }]);
    host.live = clone(host.sessions.get('S'));
    host.binding = 'S';
    const { streamId } = await turns.send({ text: 'q' });
    const r = await turns.loadSession({ id: 'S' });
    assert.deepEqual(r.saved, { id: 'S', created: false });
    assert.equal(r.stream.streamId, streamId);
    assert.equal(turns.state().stream.bg, false);
    g.open();
    await turns.idle();
    assert.equal(events.at(-1).type, 'chat.done');
    assert.deepEqual(host.live.map((e) => e.content), ['first', 'q', 'AB']);
  });

  test('new session with nothing to save drops the stream: no salvage', async () => {
    const { host, events, turns } = setup({ script: [hang(['some text'])] });
    await turns.send({ text: 'q' });
    while (!events.some((e) => e.type === 'chat.delta')) await tick();
    host.live = []; // e.g. the user deleted the entries meanwhile
    const r = await turns.newSession();
    assert.equal(r.saved, null);
    assert.ok(r.dropped);
    await turns.idle();
    assert.equal(host.ops('history.append').length, 1);
    assert.equal(host.ops('sessions.appendTo').length, 0);
    assert.equal(events.at(-1).error.code, 'dropped');
  });

  test('load of an unknown session changes nothing; the stream stays in view', async () => {
    const g = gate();
    const { host, turns } = setup({ script: [hang(['A'], { until: g.promise })] });
    const { streamId } = await turns.send({ text: 'q' });
    await assert.rejects(turns.loadSession({ id: 'nope' }), { code: 'not_found' });
    assert.equal(turns.state().stream.streamId, streamId);
    g.open();
    await turns.idle();
    assert.equal(host.live[1].content, 'A');
  });
});

describe('chat.resend (Edit & resend)', () => {
  test('keeps the old turn as another version (history.branch), then streams the reply', async () => {
    const { host, turns, events } = setup({ script: [reply(['new answer'])] });
    host.seed([{ role: 'user', content: 'old q' }, { role: 'assistant', content: 'old a' }]);
    const r = await turns.resend({ fromIndex: 0, text: 'new q', images: [] });
    await turns.idle();
    assert.equal(r.userIndex, 0);
    assert.deepEqual(r.fork, { forkEntryId: '', chosen: 2, versions: 2 });
    assert.deepEqual(host.ops('history.branch')[0].args, { index: 0, entry: { role: 'user', content: 'new q' } });
    assert.equal(host.ops('request.build')[0].args.upTo, 0, 'the history before the edited turn');
    assert.deepEqual(host.live.map((e) => e.content), ['new q', 'new answer']);
    assert.deepEqual(host.versions[0].entries.map((e) => e.content), ['old q', 'old a'], 'nothing thrown away');
    assert.ok(events.some((e) => e.type === 'chat.done'));
    assert.equal(host.ops('history.truncateFrom').length, 0);
  });

  test('when the branch fails nothing is stored or shown', async () => {
    const { host, turns, events } = setup({ script: [reply(['x'])] });
    host.live.push({ role: 'user', content: 'old q' });
    host.fail['history.branch'] = hostError('busy');
    await assert.rejects(turns.resend({ fromIndex: 0, text: 'new' }), { code: 'busy' });
    await turns.idle();
    assert.deepEqual(host.live, [{ role: 'user', content: 'old q' }]);
    assert.equal(host.versions.length, 0);
    assert.ok(!events.some((e) => e.type === 'chat.start'));
  });
});

describe('chat.regenerate', () => {
  test('a new reply becomes another version of the old one, only once it succeeded', async () => {
    const { host, turns, llm } = setup({ script: [reply(['second try'])] });
    host.seed([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'first try' }]);
    const r = await turns.regenerate({ index: 1 });
    assert.equal(r.userIndex, 0);
    await turns.idle();
    assert.equal(host.ops('history.append').length, 0, 'the question is not sent twice');
    assert.equal(host.ops('request.build')[0].args.retry, 0);
    assert.deepEqual(llm.calls[0].body.messages.at(-1), { role: 'user', content: 'q' });
    assert.deepEqual(host.ops('history.branch')[0].args.index, 1);
    assert.deepEqual(host.live.map((e) => e.content), ['q', 'second try']);
    assert.deepEqual(host.versions[0].entries.map((e) => e.content), ['first try']);
  });

  test('a failed regenerate stores nothing: the old reply stays', async () => {
    const { host, turns, events } = setup({ script: [httpError(500, 'upstream down')] });
    host.seed([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'first try' }]);
    await turns.regenerate({ index: 1 });
    await turns.idle();
    assert.deepEqual(host.live.map((e) => e.content), ['q', 'first try']);
    assert.equal(host.versions.length, 0);
    assert.equal(host.ops('history.markFailed').length, 0, 'the question has its answer');
    assert.ok(events.some((e) => e.type === 'chat.error' && !e.failed));
  });

  test('a stopped regenerate keeps what it wrote as a version', async () => {
    const { host, turns, events } = setup({ script: [hang(['half'])] });
    host.seed([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'first try' }]);
    const { streamId } = await turns.regenerate({ index: 1 });
    while (!events.some((e) => e.type === 'chat.delta')) await tick();
    await turns.stop({ streamId });
    await turns.idle();
    assert.deepEqual(host.live.map((e) => [e.content, e.interrupted]), [['q', undefined], ['half', true]]);
    assert.deepEqual(host.versions[0].entries.map((e) => e.content), ['first try']);
  });

  test('a reply that moved meanwhile is not replaced: the new one is added', async () => {
    const g = gate();
    const { host, turns, events } = setup({ script: [hang(['B'], { until: g.promise, then: [] })] });
    host.seed([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'first try' }]);
    await turns.regenerate({ index: 1 });
    while (!events.some((e) => e.type === 'chat.delta')) await tick();
    host.live.splice(1, 1); // deleted in another panel
    g.open();
    await turns.idle();
    assert.equal(host.ops('history.branch').length, 0);
    assert.deepEqual(host.live.map((e) => e.content), ['q', 'B']);
  });

  test('refuses what is not a reply', async () => {
    const { host, turns } = setup({ script: [] });
    host.live.push({ role: 'user', content: 'q' });
    await assert.rejects(turns.regenerate({ index: 0 }), { code: 'bad_request' });
    await assert.rejects(turns.regenerate({ index: 5 }), { code: 'bad_request' });
    await assert.rejects(turns.regenerate({}), { code: 'bad_request' });
  });
});

describe('failed turns and Retry', () => {
  test('a request that fails with nothing streamed marks the message failed; Retry resends it once', async () => {
    const { host, turns, events } = setup({ script: [httpError(500, 'Internal Server Error'), reply(['Rayleigh'])] });
    await turns.send({ text: 'why is the sky blue?' });
    await turns.idle();
    const err = events.find((e) => e.type === 'chat.error');
    assert.equal(err.failed.index, 0);
    assert.equal(host.live[0].failed.code, err.error.code);
    assert.ok(host.live[0].failed.message.length > 0);
    assert.equal(host.live.length, 1, 'the message stays, marked');

    const r = await turns.retry({ index: 0 });
    assert.equal(r.userIndex, 0);
    await turns.idle();
    assert.equal(host.ops('history.append').filter((c) => c.args.entry.role === 'user').length, 1, 'no second copy');
    assert.equal(host.ops('request.build').at(-1).args.retry, 0);
    assert.deepEqual(host.live.map((e) => e.content), ['why is the sky blue?', 'Rayleigh']);
    assert.equal(host.live[0].failed, undefined, 'the reply cleared the mark');
  });

  test('a stopped request is not a failure', async () => {
    const { host, turns, events } = setup({ script: [hang([])] });
    const { streamId } = await turns.send({ text: 'q' });
    await tick();
    await turns.stop({ streamId });
    await turns.idle();
    assert.equal(host.ops('history.markFailed').length, 0);
    assert.equal(host.live[0].failed, undefined);
    assert.ok(events.some((e) => e.type === 'chat.error' && !e.failed));
  });

  test('a message after a failed one is sent with it: the request carries both', async () => {
    const { host, turns, llm } = setup({ script: [httpError(502, 'Bad Gateway'), reply(['both seen'])] });
    await turns.send({ text: 'first' });
    await turns.idle();
    await turns.send({ text: 'second' });
    await turns.idle();
    const msgs = llm.calls[1].body.messages;
    assert.deepEqual(msgs.slice(-2), [{ role: 'user', content: 'first' }, { role: 'user', content: 'second' }]);
    assert.deepEqual(host.live.map((e) => e.content), ['first', 'second', 'both seen']);
  });
});

function fakeChrome({ page, tabUrl = 'https://example.com/article', seekResult = true } = {}) {
  const calls = [];
  return {
    calls,
    windows: { WINDOW_ID_CURRENT: -2 },
    tabs: {
      get: async (tabId) => ({ id: tabId, url: tabUrl, title: 'Tab title' }),
      captureVisibleTab: async (windowId, opts) => {
        calls.push({ captureVisibleTab: [windowId, opts] });
        return png(RED);
      },
    },
    scripting: {
      executeScript: async (inj) => {
        calls.push({ executeScript: inj });
        if (inj.files) return [{}];
        if (inj.func.name === 'extractReadablePage') return [{ result: page }];
        if (inj.func.name === 'seekScript') return [{ result: seekResult }];
        throw new Error('unexpected func');
      },
    },
  };
}

describe('chat.attachPage and auto-summary', () => {
  const longText = 'word '.repeat(600).trim(); // 2,999 chars

  test('attach without summary', async () => {
    const chrome = fakeChrome({ page: { title: 'Article', url: 'https://example.com/article', text: 'short body', hasVideo: false } });
    const { host, llm, turns } = setup({ chrome });
    const r = await turns.attachPage({ tabId: 5 });
    assert.deepEqual(r, { attachId: 'att-1', index: 0, length: 1, title: 'Article', url: 'https://example.com/article', chars: 10, summarized: false });
    assert.deepEqual(host.ops('history.attach')[0].args, {
      ctx: { url: 'https://example.com/article', title: 'Article', mode: 'full', body: 'short body' },
    });
    assert.equal(llm.calls.length, 0);
    assert.equal(chrome.calls[0].executeScript.target.tabId, 5);
  });

  test('N chunks → N parallel calls + 1 merge → applySummary', async () => {
    const chrome = fakeChrome({
      page: { title: 'Talk', url: 'https://www.youtube.com/watch?v=1', text: longText, hasVideo: true },
      tabUrl: 'https://www.youtube.com/watch?v=1',
    });
    const seenBodies = [];
    const summarizer = (tag) => async (o) => {
      seenBodies.push(o.body);
      return { text: ` ${tag} `, finishReason: 'stop' };
    };
    const { host, llm, events, turns } = setup({
      chrome,
      host: { threshold: 1000, chunkSize: 1000 },
      settings: { ...PROVIDERS, autoSummarizeAttachments: true },
      script: [summarizer('s1'), summarizer('s2'), summarizer('s3'), summarizer('merged')],
    });
    const r = await turns.attachPage({ tabId: 9 });
    assert.equal(r.summarized, true);
    assert.equal(llm.calls.length, 4);
    const users = seenBodies.map((b) => b.messages.at(-1).content);
    assert.ok(users[0].startsWith('[Segment 1/3]\n'));
    assert.ok(users[2].startsWith('[Segment 3/3]\n'));
    assert.equal(users[3], '[Segment 1]\ns1\n\n[Segment 2]\ns2\n\n[Segment 3]\ns3');
    assert.match(seenBodies[0].messages[0].content, /\[mm:ss\]/, 'video family keeps timestamps');
    assert.deepEqual(host.ops('attach.applySummary')[0].args, { attachId: 'att-1', summary: 'merged' });
    assert.equal(host.live[0].summarized, true);
    assert.deepEqual(host.live[0].videoSrc, { platform: 'youtube', url: 'https://www.youtube.com/watch?v=1', tabId: 9 });
    const prog = events.filter((e) => e.type === 'chat.progress').map((e) => [e.stage, e.done, e.total]);
    assert.deepEqual(prog[0], ['summary', 0, 4]);
    assert.deepEqual(prog.at(-1), ['summary', 4, 4]);
  });

  test('one chunk → one call; a failed call → no applySummary', async () => {
    const chrome = fakeChrome({ page: { title: 'A', url: 'https://a/', text: longText, hasVideo: false } });
    const { host, llm, turns } = setup({
      chrome,
      host: { threshold: 1000, chunkSize: 5000 },
      script: [async () => ({ text: 'short summary', finishReason: 'stop' })],
    });
    const r = await turns.attachPage({ tabId: 1 });
    assert.equal(r.summarized, true);
    assert.equal(llm.calls.length, 1);
    assert.equal(llm.calls[0].body.messages.at(-1).content, longText);

    const h2 = setup({
      chrome,
      host: { threshold: 1000, chunkSize: 1000 },
      script: [async () => ({ text: 'ok' }), failWith(llmError('network', 'Failed to fetch')), async () => ({ text: 'ok' })],
    });
    const r2 = await h2.turns.attachPage({ tabId: 1 });
    assert.equal(r2.summarized, false);
    assert.equal(r2.summaryError.code, 'network');
    assert.equal(h2.host.ops('attach.applySummary').length, 0);
    assert.ok(!host.ops('attach.applySummary').length || host.live[0].summarized);
  });

  test('autoSummarizeAttachments false → no LLM call', async () => {
    const chrome = fakeChrome({ page: { title: 'A', url: 'https://a/', text: longText } });
    const { llm, turns } = setup({
      chrome,
      host: { threshold: 1000 },
      settings: { ...PROVIDERS, autoSummarizeAttachments: false },
    });
    const r = await turns.attachPage({ tabId: 1 });
    assert.equal(r.summarized, false);
    assert.equal(llm.calls.length, 0);
  });

  test('scripting failure → attach_failed, nothing stored', async () => {
    const chrome = fakeChrome({});
    chrome.scripting.executeScript = async () => {
      throw new Error('Cannot access a chrome:// URL');
    };
    const { host, turns } = setup({ chrome });
    await assert.rejects(turns.attachPage({ tabId: 1 }), { code: 'attach_failed' });
    assert.equal(host.ops('history.attach').length, 0);
  });
});

describe('with the real lib/llm.js over a fake fetch', () => {
  const sse = (obj) => `data: ${JSON.stringify(obj)}\n\n`;
  function sseFetch(chunks, { hang = false, seen = [] } = {}) {
    return async (url, init) => {
      seen.push({ url, body: JSON.parse(init.body) });
      const enc = new TextEncoder();
      const body = new ReadableStream({
        start(ctrl) {
          for (const c of chunks) ctrl.enqueue(enc.encode(c));
          if (!hang) ctrl.close();
          else init.signal?.addEventListener('abort', () => ctrl.error(new DOMException('aborted', 'AbortError')));
        },
      });
      return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
    };
  }

  test('chat completions stream → reply appended', async () => {
    const seen = [];
    const host = new FakeHost({ settings: clone(PROVIDERS) });
    const events = [];
    const turns = createTurns({
      storage: host.storage,
      broadcast: (e) => events.push(e),
      chrome: {},
      fetchImpl: sseFetch(
        [
          sse({ choices: [{ delta: { content: 'Hel' } }] }),
          sse({ choices: [{ delta: { content: 'lo' } }] }),
          sse({ choices: [{ delta: {}, finish_reason: 'stop' }] }),
          'data: [DONE]\n\n',
        ],
        { seen },
      ),
    });
    await turns.send({ text: 'hi' });
    await turns.idle();
    assert.equal(seen[0].url, 'https://api.example/v1/chat/completions');
    assert.equal(seen[0].body.model, 'gpt-x');
    assert.equal(seen[0].body.messages.at(-1).content, 'hi');
    assert.equal(host.live[1].content, 'Hello');
    // deltas that came before the user entry was stored arrive joined, after chat.start
    assert.equal(events[0].type, 'chat.start');
    assert.equal(events.filter((e) => e.type === 'chat.delta').map((e) => e.delta).join(''), 'Hello');
    assert.equal(events.at(-1).type, 'chat.done');
  });

  test('stop during a real stream salvages the partial text', async () => {
    const host = new FakeHost({ settings: clone(PROVIDERS) });
    const events = [];
    const turns = createTurns({
      storage: host.storage,
      broadcast: (e) => events.push(e),
      chrome: {},
      fetchImpl: sseFetch([sse({ choices: [{ delta: { content: 'Half of it' } }] })], { hang: true }),
    });
    const { streamId } = await turns.send({ text: 'hi' });
    while (!events.some((e) => e.type === 'chat.delta')) await tick();
    assert.deepEqual(await turns.stop({ streamId }), { stopped: true, salvagedIndex: 1 });
    assert.deepEqual(
      { content: host.live[1].content, interrupted: host.live[1].interrupted },
      { content: 'Half of it', interrupted: true },
    );
    assert.equal(events.at(-1).error.code, 'stopped');
  });
});

describe('tab helpers and wiring', () => {
  test('seek; no screenshot in the worker (the panel captures and attaches: sidepanel/pixels.js)', async () => {
    const chrome = fakeChrome({});
    const { turns } = setup({ chrome });
    assert.equal(turns.screenshot, undefined, 'pixels never pass through the worker');
    assert.deepEqual(await turns.seek({ tabId: 3, seconds: 75 }), { ok: true });
    assert.deepEqual(chrome.calls[0].executeScript.args, [75]);
    await assert.rejects(turns.seek({ tabId: 3, seconds: -1 }), { code: 'bad_request' });
  });

  test('keep-alive pings an extension API only while a stream runs', async () => {
    const g = gate();
    const host = new FakeHost({ settings: clone(PROVIDERS) });
    const intervals = new Map();
    let pings = 0;
    const turns = createTurns({
      storage: host.storage,
      llm: createFakeLlm([hang(['x'], { until: g.promise })]),
      chrome: { runtime: { getPlatformInfo: async () => (pings++, {}) } },
      timers: {
        setInterval: (fn, ms) => (intervals.set(1, { fn, ms }), 1),
        clearInterval: (id) => intervals.delete(id),
      },
    });
    await turns.send({ text: 'q' });
    assert.equal(intervals.get(1).ms, 20_000);
    intervals.get(1).fn();
    assert.equal(pings, 1);
    g.open();
    await turns.idle();
    assert.equal(intervals.size, 0);
  });

  test('installTurnHandlers registers every chat handler', async () => {
    const kinds = new Map();
    const host = new FakeHost({ settings: PROVIDERS });
    installTurnHandlers((k, fn) => kinds.set(k, fn), { port: null, storage: host.storage, broadcast: () => {} }, { chrome: {} });
    assert.deepEqual(
      [...kinds.keys()].sort(),
      [
        'chat.attachPage',
        'chat.loadSession',
        'chat.newSession',
        'chat.regenerate',
        'chat.resend',
        'chat.retry',
        'chat.seek',
        'chat.send',
        'chat.state',
        'chat.stop',
      ],
    );
    assert.deepEqual(await kinds.get('chat.state')({ kind: 'chat.state' }), { stream: null, background: [] });
  });
});

// ---------------------------------------------------------------------------------------------
// Against the real keepsake-host (stdio frames, like Chrome)

const HERE = dirname(fileURLToPath(import.meta.url));
const BIN = join(HERE, '..', '..', 'target', 'debug', 'keepsake-host');

function startRealHost() {
  const dir = mkdtempSync(join(tmpdir(), 'keepsake-turns-'));
  const child = spawn(BIN, ['chrome-extension://ejaedcjldiggibmnammkkoekohjgefkk/'], {
    env: { ...process.env, KEEPSAKE_SECRET_STORE: 'off', KEEPSAKE_DB: join(dir, 'keepsake.db') },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  const le = endianness() === 'LE';
  let buf = Buffer.alloc(0);
  const pending = new Map();
  const chunks = new Map();
  let nextId = 1;
  child.stdout.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      if (buf.length < 4) return;
      const n = le ? buf.readUInt32LE(0) : buf.readUInt32BE(0);
      if (buf.length < 4 + n) return;
      const msg = JSON.parse(buf.subarray(4, 4 + n).toString('utf8'));
      buf = buf.subarray(4 + n);
      if (msg.event) continue;
      let reply = msg;
      if (msg.chunk) {
        const list = chunks.get(msg.id) ?? [];
        list.push(msg.data);
        chunks.set(msg.id, list);
        if (list.length < msg.chunk.count) continue;
        chunks.delete(msg.id);
        reply = JSON.parse(list.join(''));
      }
      const p = pending.get(reply.id);
      if (!p) continue;
      pending.delete(reply.id);
      if (reply.ok) p.resolve(reply.result);
      else p.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
    }
  });
  const call = (op, args = {}) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      const body = Buffer.from(JSON.stringify({ id, op, args }), 'utf8');
      const head = Buffer.alloc(4);
      if (le) head.writeUInt32LE(body.length);
      else head.writeUInt32BE(body.length);
      child.stdin.write(Buffer.concat([head, body]));
    });
  const close = async () => {
    child.stdin.end();
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  };
  return { call, close, storage: createStorage(call) };
}

describe('against the real keepsake-host', { skip: !existsSync(BIN) && 'target/debug/keepsake-host not built' }, () => {
  async function withHost(fn) {
    const h = startRealHost();
    try {
      await h.storage.settings.set({ map: { ...PROVIDERS, autoSummarizeAttachments: true } });
      await fn(h);
    } finally {
      await h.close();
    }
  }
  function realSetup(h, script, extra = {}) {
    const llm = createFakeLlm(script);
    h.builds = [];
    const build = h.storage.request.build;
    const storage = {
      ...h.storage,
      request: {
        ...h.storage.request,
        build: async (args) => {
          const r = await build(args);
          h.builds.push({ args, result: r });
          return r;
        },
      },
    };
    const events = [];
    let n = 0;
    const turns = createTurns({
      storage,
      llm,
      broadcast: (e) => events.push(e),
      chrome: extra.chrome ?? {},
      newId: () => `rs-${++n}`,
    });
    return { llm, events, turns };
  }

  test('send with an image: placeholders filled, blob stored, seen after success; held refs reused', async () => {
    await withHost(async (h) => {
      let inline;
      const { llm, turns } = realSetup(h, [
        reply(['Looks red.']),
        failWith(llmError('http', 'Internal error', { status: 500 })),
        async (o) => {
          inline = await h.storage.request.build({
            kind: 'chat',
            turn: { userText: 'compare', images: [] },
            systemPrompt: 'Be brief.',
            bodyFields: { model: 'gpt-x', stream: true },
            upTo: 3,
          });
          return reply(['Both.'])(o);
        },
      ]);
      await turns.send({ text: 'what colour?', images: [png(RED)] });
      await turns.idle();
      const body = llm.calls[0].body;
      assert.equal(collectTokens(body).size, 0);
      const user = body.messages.at(-1);
      assert.deepEqual(user.content[1], { type: 'image_url', image_url: { url: png(RED) } });
      assert.equal(body.messages[0].content, 'Be brief.');
      const stored = await h.storage.history.get({ images: 'ref' });
      assert.equal(stored.entries.length, 2);
      assert.match(stored.entries[0].content[1].image_url.url, /^keepsake-image:sha256:[0-9a-f]{64}$/);
      assert.equal(stored.entries[0].imagesSeen, true);
      assert.equal(stored.entries[1].content, 'Looks red.');
      assert.equal(stored.entries[1].providerLabel, 'OpenAI · gpt-x');

      // a failed turn leaves its image unseen: the next build keeps it as a held reference
      await turns.send({ text: 'and this?', images: [png(BLUE)] });
      await turns.idle();
      await turns.send({ text: 'compare' });
      await turns.idle();
      const third = llm.calls[2].body;
      assert.equal(collectTokens(third).size, 0);
      assert.ok(JSON.stringify(third).includes(png(BLUE)), 'the unseen image is sent, filled from the held bytes');
      const held = h.builds.at(-1);
      assert.equal(held.args.imageRefs.length, 2, 'both turn images are held');
      assert.deepEqual(
        held.result.imageRefs.map((t) => t.slice(0, 22)),
        ['keepsake-image:sha256:'],
        'the host left the held reference in the body instead of shipping its bytes',
      );
      assert.equal(JSON.stringify(third), JSON.stringify(inline.body), 'filled body equals the inline build');
      const after = await h.storage.history.get({ images: 'ref' });
      assert.deepEqual(after.entries.map((e) => e.role), ['user', 'assistant', 'user', 'user', 'assistant']);
      assert.equal(after.entries[2].imagesSeen, true);
    });
  });

  test('a text-only turn after another: the body comes back as a delta; a new worker gets one full body', async () => {
    await withHost(async (h) => {
      const entries = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: prose(i, 4000) }));
      await h.storage.history.replace({ entries });
      let expected;
      const { llm, turns } = realSetup(h, [
        reply(['A1 😀']),
        async (o) => {
          const live = await h.storage.history.get({});
          expected = await h.storage.request.build({
            kind: 'chat',
            turn: { userText: 'q2 中文', images: [] },
            systemPrompt: 'Be brief.',
            bodyFields: { model: 'gpt-x', stream: true },
            upTo: live.entries.length - 1,
          });
          return reply(['A2'])(o);
        },
      ]);
      await turns.send({ text: 'q1' });
      await turns.idle();
      await turns.send({ text: 'q2 中文' });
      await turns.idle();
      const [first, second] = h.builds;
      assert.equal(first.args.since, '');
      assert.equal(typeof first.result.bodyText, 'string');
      assert.equal(first.result.body, undefined);
      assert.equal(second.args.since, first.result.bodyHash);
      assert.ok(second.result.bodyDelta, 'the second body travelled as a delta');
      const size = JSON.stringify(second.result).length;
      assert.ok(size < 1000, `delta reply ${size} chars for a ${first.result.bodyText.length}-char body`);
      assert.equal(JSON.stringify(llm.calls[1].body), JSON.stringify(expected.body), 'the same body as a plain build');
      // that text went to the provider as the host wrote it, already holding what llm.js would set
      assert.equal(typeof llm.calls[1].bodyText, 'string');
      assert.equal(llm.calls[1].body.model, 'gpt-x');
      assert.equal(llm.calls[1].body.stream, true);

      // a restarted worker holds nothing: one full body
      const again = realSetup(h, [reply(['A3'])]);
      await again.turns.send({ text: 'q3' });
      await again.turns.idle();
      assert.equal(h.builds[0].args.since, '');
      assert.equal(typeof h.builds[0].result.bodyText, 'string');
    });
  });

  test('anthropic: the turn image goes out as bare base64', async () => {
    await withHost(async (h) => {
      await h.storage.settings.set({ map: { activeProvider: 'p2', activeModel: 'c-3' } });
      const { llm, turns } = realSetup(h, [reply(['ok'])]);
      await turns.send({ text: 'see', images: [png(RED)] });
      await turns.idle();
      const msg = llm.calls[0].body.messages.at(-1);
      assert.deepEqual(msg.content[1], { type: 'image', source: { type: 'base64', media_type: 'image/png', data: RED } });
      assert.equal(llm.calls[0].body.max_tokens, 4096);
    });
  });

  test('overflow rescue → commitRescue stubs the stored attach', async () => {
    await withHost(async (h) => {
      const a = await h.storage.history.attach({
        ctx: { url: 'https://big.example/', title: 'Big', mode: 'full', body: 'lorem ipsum '.repeat(1000) },
      });
      const { llm, turns } = realSetup(h, [
        failWith(llmError('http', 'context_length_exceeded: too many tokens', { status: 400 })),
        reply(['Short answer']),
      ]);
      await turns.send({ text: 'summarise' });
      await turns.idle();
      assert.equal(llm.calls.length, 2);
      assert.ok(JSON.stringify(llm.calls[1].body).includes('too large for the model'));
      assert.equal(llm.calls[1].body.messages.filter((m) => m.role === 'user').length, 2, 'no duplicated turn');
      const stored = await h.storage.history.get({});
      assert.equal(stored.entries[0].attachId, a.attachId);
      assert.ok(stored.entries[0].content.includes('too large for the model'));
      assert.equal(stored.entries.at(-1).content, 'Short answer');
    });
  });

  test('auto-summary with the host plan: N chunks → N + 1 calls → applySummary', async () => {
    await withHost(async (h) => {
      await h.storage.settings.set({ map: { summarizeThresholdChars: 1000 } });
      const lines = Array.from({ length: 600 }, (_, i) => `Line ${i}: ${'content '.repeat(6)}`).join('\n');
      const chrome = fakeChrome({ page: { title: 'Long', url: 'https://long.example/', text: lines, hasVideo: false } });
      const script = [];
      for (let i = 0; i < 10; i++) script.push(async () => ({ text: `summary ${i}`, finishReason: 'stop' }));
      const { llm, turns } = realSetup(h, script, { chrome });
      const r = await turns.attachPage({ tabId: 2 });
      const plan = await h.storage.attach.summaryPlan({ attachId: r.attachId }).catch(() => null);
      assert.equal(r.summarized, true);
      const n = llm.calls.length - 1;
      assert.ok(n >= 2, `several chunks (${n})`);
      assert.ok(llm.calls[n].body.messages.at(-1).content.startsWith('[Segment 1]\n'));
      const stored = await h.storage.history.get({});
      assert.equal(stored.entries[0].summarized, true);
      assert.ok(stored.entries[0].content.includes('auto-condensed'));
      assert.equal(plan?.needed ?? false, false, 'summarized entries need no further summary');
    });
  });

  test('hand-off: load during a stream routes the reply to the saved session', async () => {
    await withHost(async (h) => {
      await h.storage.history.append({ entry: { role: 'user', content: 'other session' } });
      const other = await h.storage.sessions.save({});
      await h.storage.history.clear({});
      const g = gate();
      const { events, turns } = realSetup(h, [hang(['A'], { until: g.promise, then: ['B'] })]);
      await turns.send({ text: 'q' });
      while (!events.some((e) => e.type === 'chat.delta')) await tick();
      const r = await turns.loadSession({ id: other.session.id });
      assert.equal(r.saved.created, false, 'the chat was kept from its first entry');
      g.open();
      await turns.idle();
      const saved = await h.storage.sessions.get({ id: r.saved.id });
      assert.deepEqual(saved.entries.map((e) => e.content), ['q', 'AB']);
      const live = await h.storage.history.get({});
      assert.deepEqual(live.entries.map((e) => e.content), ['other session']);
    });
  });

  test('the reply gets videoSrc from where it lands: the handed-off session, not the live history', async () => {
    await withHost(async (h) => {
      const here = { platform: 'youtube', url: 'https://www.youtube.com/watch?v=here', tabId: 1 };
      const there = { platform: 'html5', url: 'https://example.org/there.mp4', tabId: 2 };
      await h.storage.history.append({ entry: { role: 'user', content: 'other session', videoSrc: there } });
      const other = await h.storage.sessions.save({});
      await h.storage.history.clear({});
      await h.storage.history.append({ entry: { role: 'user', content: 'watching', videoSrc: here } });
      // the worker reads no history or session for it: the host copies it
      const reads = [];
      const counted = (name, fn) => (args) => {
        reads.push(name);
        return fn(args);
      };
      const plain = h.storage;
      h.storage = {
        ...plain,
        history: { ...plain.history, get: counted('history.get', plain.history.get) },
        sessions: { ...plain.sessions, get: counted('sessions.get', plain.sessions.get) },
      };
      const g = gate();
      const { events, turns } = realSetup(h, [reply(['live reply']), hang(['A'], { until: g.promise, then: ['B'] })]);
      h.storage = plain;
      await turns.send({ text: 'q1' });
      await turns.idle();
      assert.deepEqual(reads, []);
      let live = await h.storage.history.get({});
      assert.deepEqual(live.entries.at(-1).videoSrc, here, 'a live reply: from the live history');
      await turns.send({ text: 'q2' });
      while (!events.some((e) => e.type === 'chat.delta' && e.delta === 'A')) await tick();
      const r = await turns.loadSession({ id: other.session.id });
      g.open();
      await turns.idle();
      assert.deepEqual(reads, []);
      const saved = await h.storage.sessions.get({ id: r.saved.id });
      assert.equal(saved.entries.at(-1).content, 'AB');
      assert.deepEqual(saved.entries.at(-1).videoSrc, here);
      live = await h.storage.history.get({});
      assert.deepEqual(live.entries.map((e) => e.videoSrc), [there], 'the loaded session is untouched');
    });
  });
});

describe('videoSrc: the host copies it (copyVideoSrc), the worker never does', () => {
  test('a bad_request for copyVideoSrc is not retried without the flag', async () => {
    const { host, turns } = setup({ script: [reply(['ok'])], host: { copiesVideoSrc: false } });
    const v = { platform: 'youtube', url: 'v', tabId: 3 };
    host.live.push({ role: 'user', content: 'watch', videoSrc: v });
    await turns.send({ text: 'hi' }).catch(() => {});
    await turns.idle();
    assert.deepEqual(host.ops('history.append').map((c) => c.args.copyVideoSrc), [undefined], 'the user entry');
    // the reply goes to the turn's session (live here) with the flag, once
    const replies = host.ops('sessions.appendTo').map((c) => c.args.copyVideoSrc);
    assert.deepEqual(replies, [true], 'one refused reply, no copy by the worker');
    assert.ok(host.live.every((e) => e.content !== 'ok' || !e.videoSrc), 'the worker set no videoSrc itself');
  });
});
