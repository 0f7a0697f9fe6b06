// Chat turns in the service worker (README "Worker chat handlers"): the turn engine.
//
// One send = one user entry appended before streaming (storage-model §9 "Turns"); the reply is
// streamed with lib/llm.js and appended when it completes, or salvaged with `interrupted: true`
// when it is aborted. Stream state is worker memory only; every durable byte goes through
// storage.js to keepsake-host.
//
// `createTurns` takes every side effect (storage, llm, chrome, broadcast, clock, timers) as an
// argument so node --test can drive it. What a turn uses lives in modules of its own: provider.js
// (which card, which body fields), image-tokens.js and image-cache.js (pictures in request bodies),
// body-memory.js (bodies as deltas), settings-memory.js (the turn settings), choices.js (choice
// blocks), turn-lock.js, keep-alive.js, page-attach.js (chat.attachPage) and summaries.js
// (auto-summary); lib/entries.js holds the entry rules the panel shares.

import { t } from '../lib/i18n.js';
import { changeAreas } from '../lib/protocol.js';
import { streamReply as defaultStreamReply } from '../lib/llm.js';
import { seekScript } from '../lib/pills.js';
import { entryText, isAttachEntry, newestVideoSrc } from '../lib/entries.js';
import { codeError, errorInfo } from './errors.js';
import { STREAM_KINDS, bodyFieldsFor, isBlank, pickProvider } from './provider.js';
import { AGENT_SESSION_GONE, createAgentSession as defaultCreateAgentSession } from '../lib/agents.js';
import { createAgentSessions } from './agent-sessions.js';
import {
  TURN_TOKEN_PREFIX,
  bodyHasImages,
  collectTokens,
  fillImageTokens,
  parseDataUrl,
  textHasImages,
  textHasTokens,
} from './image-tokens.js';
import { ImageCache } from './image-cache.js';
import { BodyMemory } from './body-memory.js';
import { SettingsMemory, TURN_SETTING_KEYS } from './settings-memory.js';
import { stripChoiceBlocks } from './choices.js';
import { createLock } from './turn-lock.js';
import { KEEPALIVE_MS, createKeepAlive } from './keep-alive.js';
import { SUMMARY_CONCURRENCY, createSummarizer } from './summaries.js';
import { createPageAttach } from './page-attach.js';


function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// the continuation pass's instruction: words to the model, never shown in the panel
const CONTINUATION_INSTRUCTION =
  'Your previous reply was cut off by the output length limit. Continue exactly where it stopped, ' + // i18n-ok: prompt to the model
  'without repeating anything and without any preamble.'; // i18n-ok: prompt to the model

/**
 * Where this turn's user entry sits in `entries` now: `hint` if it still matches, else the newest
 * non-attach user entry with the same text; -1 if none (front trims and write-backs move indexes).
 */
export function findUserEntryIndex(entries, text, hint) {
  if (!Array.isArray(entries)) return -1;
  const matches = (e) => isObject(e) && e.role === 'user' && !isAttachEntry(e) && entryText(e) === text;
  if (Number.isInteger(hint) && hint >= 0 && hint < entries.length && matches(entries[hint])) return hint;
  for (let i = entries.length - 1; i >= 0; i--) if (matches(entries[i])) return i;
  return -1;
}

/** Error kinds after which an overflow rescue may be tried (§7.3: HTTP errors of rescuable kinds; not `agent`). */
function mayRescue(e, { kind, rescued, text }) {
  return !rescued && e?.kind === 'http' && (STREAM_KINDS.includes(kind) || kind === 'runs') && isBlank(text) && !isBlank(e?.message);
}

// ---------------------------------------------------------------------------------------------
// The engine

/**
 * @param {object} deps
 * @param {object} deps.storage        createStorage(...) client
 * @param {(event: object) => void} [deps.broadcast]
 * @param {object} [deps.chrome]       chrome.* APIs (tabs, scripting, runtime, windows)
 * @param {{streamReply: Function, createAgentSession?: Function}} [deps.llm]  createAgentSession: lib/agents.js's
 *   (the `agent` kind: a new session on the agent server)
 * @param {() => number} [deps.now]
 * @param {{setInterval, clearInterval}} [deps.timers]
 * @param {Function} [deps.fetchImpl]  passed through to llm.streamReply
 * @param {ImageCache} [deps.imageCache]
 * @param {BodyMemory} [deps.bodyMemory] the last body text received (request bodies as deltas)
 * @param {{on: Function}} [deps.events] the NativePort's events (`changed`, `state`): with them the
 *   turn settings are kept between sends (SettingsMemory)
 * @param {() => string} [deps.newId]
 * @param {object} [deps.siteCache]  site-cache.js (page-attach keeps a video's transcript there)
 * @param {object} [deps.pdfReader]  pdf-attach.js's reader (default: the offscreen document)
 * @param {object|null} [deps.watch]  lib/page-fetch.js's request watch, for page-attach.js's fetches
 */
export function createTurns(deps) {
  const {
    storage,
    broadcast = () => {},
    chrome = globalThis.chrome,
    llm = { streamReply: defaultStreamReply },
    now = () => Date.now(),
    timers = { setInterval: (fn, ms) => globalThis.setInterval(fn, ms), clearInterval: (t) => globalThis.clearInterval(t) },
    fetchImpl,
    imageCache = new ImageCache(),
    bodyMemory = new BodyMemory(),
    events = null,
    keepAliveMs = KEEPALIVE_MS,
    summaryConcurrency = SUMMARY_CONCURRENCY,
  } = deps;
  let idSeq = 0;
  const newId =
    deps.newId ?? (() => (globalThis.crypto?.randomUUID ? globalThis.crypto.randomUUID() : `s${now()}-${++idSeq}`));

  const agentSessions = createAgentSessions({ storage, now });
  const createAgentSession = llm.createAgentSession ?? defaultCreateAgentSession;
  const settingsMemory = new SettingsMemory(() => storage.settings.get({ keys: [...TURN_SETTING_KEYS] }), events);
  // A restore (issue 36) puts another database in place: nothing the worker holds of the old one is
  // used again. The turn settings go with every settings change (settings-memory.js, a restore
  // names every area); the last body goes here. Image bytes stay: a reference names its bytes.
  events?.on?.('changed', (change) => {
    if (changeAreas(change).restored) bodyMemory.forget();
  });
  const streams = new Map(); // streamId → stream (until settled)
  const lock = createLock();
  let sending = false;
  const pending = new Set(); // promises of running turns/summaries (tests await idle())
  const keepAlive = createKeepAlive({ chrome, timers, ms: keepAliveMs });
  const summarize = createSummarizer({
    storage,
    llm,
    fetchImpl,
    concurrency: summaryConcurrency,
    progress,
    activity: { start: keepAlive.start, end: keepAlive.end, track },
  });
  const attachPage = createPageAttach({
    storage,
    chrome,
    readSettings,
    summarize,
    siteCache: deps.siteCache ?? null,
    watch: deps.watch ?? null,
    ...(deps.pdfReader ? { pdfReader: deps.pdfReader } : {}),
    hostLimits: async () => (events?.hello ?? (await events?.open?.()))?.limits ?? null,
  });

  // ----- running work (keep-alive while streams or summaries run: keep-alive.js)
  function track(p) {
    pending.add(p);
    p.finally(() => pending.delete(p)).catch(() => {});
    return p;
  }

  function foreground() {
    for (const s of streams.values()) if (!s.bg && !s.settled) return s;
    return null;
  }
  function publicStream(s) {
    return {
      streamId: s.streamId,
      text: s.text,
      startedAt: s.startedAt,
      originSessionId: s.originSessionId,
      bg: s.bg,
      userIndex: s.userIndex,
      phase: s.phase,
    };
  }
  /** chunk/done/error/progress of a background stream are not pushed to the panel (§9). */
  function emit(stream, event) {
    if (stream?.bg) return;
    try {
      broadcast(event);
    } catch {
      /* a page going away must not break the turn */
    }
  }
  function progress(event) {
    try {
      broadcast({ type: 'chat.progress', ...event });
    } catch {
      /* ignore */
    }
  }

  // ----- request.build with imageRefs, tokens filled from what the worker holds

  async function resolveTokens(tokens, turnImages) {
    const map = new Map();
    for (const tok of tokens) {
      if (tok.startsWith(TURN_TOKEN_PREFIX)) {
        const i = Number(tok.slice(TURN_TOKEN_PREFIX.length));
        const img = parseDataUrl(turnImages?.[i]);
        if (!img) throw codeError('image_unavailable', t('turnNoSuchImage', tok));
        map.set(tok, img);
      } else {
        let img = imageCache.get(tok);
        if (!img) {
          const r = await storage.images.get({ ref: tok });
          img = { mime: String(r.mime).toLowerCase(), data: r.bytes };
          imageCache.put(tok, img);
        }
        map.set(tok, img);
      }
    }
    return map;
  }

  /**
   * request.build naming what the worker holds: image bytes (`imageRefs`) and the last body text
   * (`since`, so an unchanged history costs a few hundred bytes). The reply carries the body as
   * `bodyText` (not parsed here) when it travelled as text, else as `body`. With `deferCheck`, a
   * delta's hash check is left to the caller (`check()`, resolves false when the body must not be
   * used); otherwise a delta that does not verify is replaced by one full body here.
   */
  async function hostBuild(args, { deferCheck = false } = {}) {
    const withRefs = { ...args, imageRefs: imageCache.refs() };
    if (bodyMemory.enabled) {
      const snap = bodyMemory.snapshot();
      let res = await storage.request.build({ ...withRefs, since: snap.hash ?? '' });
      let got = bodyMemory.take(res, snap);
      if (got && !deferCheck && !(await got.check())) got = null;
      if (got === null) {
        // a delta that does not apply or verify: one full body
        bodyMemory.forget();
        res = await storage.request.build({ ...withRefs, since: '' });
        got = bodyMemory.take(res, { text: null, hash: null });
      }
      if (got === undefined) return res;
      const { bodyText, bodyDelta, ...rest } = res;
      return deferCheck ? { ...rest, bodyText: got.text, check: got.check } : { ...rest, bodyText: got.text };
    }
    return storage.request.build(withRefs);
  }

  /**
   * → {res, payload, userEntry, hasImages, check?}: `payload` is what llm.streamReply sends,
   * `{bodyText}` (the host's text as it came: no parse, no re-stringify) when the text holds no
   * image token, else `{body}` with the tokens filled. `check` only with `deferCheck` (see
   * hostBuild).
   */
  async function buildRequest(args, opts) {
    const { check, bodyText, ...res } = await hostBuild(args, opts);
    if (typeof bodyText === 'string' && !textHasTokens(bodyText)) {
      const tokens = collectTokens(res.userEntry);
      const userEntry = tokens.size ? fillImageTokens(res.userEntry, await resolveTokens(tokens, args.turn?.images)) : res.userEntry;
      return { res, payload: { bodyText }, userEntry, hasImages: textHasImages(bodyText), check };
    }
    const body = typeof bodyText === 'string' ? JSON.parse(bodyText) : res.body;
    const hasImages = bodyHasImages(body);
    const tokens = new Set([...(res.imageRefs ?? []), ...collectTokens(body), ...collectTokens(res.userEntry)]);
    if (tokens.size === 0) return { res, payload: { body }, userEntry: res.userEntry, hasImages, check };
    const map = await resolveTokens(tokens, args.turn?.images);
    return {
      res,
      payload: { body: fillImageTokens(body, map) },
      userEntry: fillImageTokens(res.userEntry, map),
      hasImages,
      check,
    };
  }

  function readSettings() {
    return settingsMemory.get();
  }

  // ----- send

  async function withSendSlot(fn) {
    if (sending || foreground()) throw codeError('busy', t('turnStillStreaming'));
    sending = true;
    try {
      return await fn();
    } finally {
      sending = false;
    }
  }

  /**
   * One turn. `mode` says where its user entry comes from (docs/keeps.md):
   * - `{kind: 'append'}`: a new message, appended (chat.send);
   * - `{kind: 'branch', index}`: Edit & resend: the live entries from `index` on are kept as
   *   another version and the new message continues the chat (history.branch);
   * - `{kind: 'retry', index}`: the stored user entry at `index` is sent again (Retry of a failed
   *   turn): nothing is appended;
   * - `{kind: 'regenerate', index, userIndex, replacedEntryId}`: the user entry at `userIndex` is
   *   sent again and the reply at `index` is replaced by a new version of it — only when the new
   *   reply succeeds or is stopped.
   */
  async function startTurn({ text = '', images = [], attachTabId } = {}, mode = { kind: 'append' }) {
    if (attachTabId != null) await attachPage({ tabId: attachTabId });
    const settings = await readSettings();
    const picked = pickProvider(settings);
    const resending = mode.kind === 'retry' || mode.kind === 'regenerate';
    const turnImages = !resending && Array.isArray(images) ? images.filter((x) => typeof x === 'string') : [];
    const baseArgs = {
      kind: picked.provider.kind,
      turn: resending ? {} : { userText: typeof text === 'string' ? text : String(text ?? ''), images: turnImages },
      bodyFields: bodyFieldsFor(picked.provider),
    };
    if (!isBlank(settings.systemPrompt)) baseArgs.systemPrompt = settings.systemPrompt;
    // the `agent` kind: the chat's session on the agent server, or backfill for a new one (§8.6)
    const agent = picked.provider.kind === 'agent' ? await agentFor(picked.provider) : null;
    if (agent && !agent.sessionId && agent.chatHasEntries) baseArgs.backfill = true;
    if (mode.kind === 'branch') baseArgs.upTo = mode.index;
    if (resending) baseArgs.retry = mode.kind === 'retry' ? mode.index : mode.userIndex;

    return lock.run(async () => {
      const built = await buildRequest(baseArgs, { deferCheck: true });
      const appending = placeUserEntry(mode, built);
      // The provider is called while the host appends the user entry (a delta's hash is checked
      // first); nothing reaches the panel or the store until that append has landed: `ready`.
      let settle;
      const ready = new Promise((resolve) => {
        settle = resolve;
      });
      const stream = {
        streamId: newId(),
        text: '',
        startedAt: now(),
        originSessionId: null,
        bg: false,
        settled: false,
        announced: false,
        ready,
        phase: 'streaming',
        userIndex: null,
        userText: entryText(built.userEntry),
        provider: picked.provider,
        providerLabel: picked.label,
        providerKey: picked.key,
        baseArgs,
        payload: built.payload,
        bodyCheck: built.check ? built.check() : null,
        markImages: built.hasImages || bodyHasImages(built.userEntry),
        controller: new AbortController(),
        stopReason: null,
        dropped: false,
        rescue: null,
        salvagedIndex: null,
        userEntryId: null,
        // Regenerate: the reply a successful (or stopped) new reply becomes another version of
        replaceAt: mode.kind === 'regenerate' ? { index: mode.index, entryId: mode.replacedEntryId } : null,
        agent,
      };
      streams.set(stream.streamId, stream);
      keepAlive.start();
      stream.done = track(
        runTurn(stream).finally(() => {
          stream.settled = true;
          streams.delete(stream.streamId);
          keepAlive.end();
        }),
      );
      let appended;
      try {
        appended = await appending;
      } catch (e) {
        // nothing was stored: the provider call is aborted unseen and the send fails as a whole
        stream.controller.abort();
        settle(false);
        await stream.done.catch(() => {});
        throw e;
      }
      stream.userIndex = appended.index;
      stream.userEntryId = appended.entryId ?? null;
      // replies go to the session the turn was sent in, wherever the live chat is by then
      stream.originSessionId = appended.sessionId || null;
      for (const u of turnImages) imageCache.addDataUrl(u).catch(() => {});
      announce(stream);
      settle(true);
      return {
        streamId: stream.streamId,
        userIndex: appended.index,
        length: appended.length,
        droppedImages: built.res.droppedImages ?? 0,
        sessionId: appended.sessionId ?? null,
        ...(appended.kept ? { kept: appended.kept, evicted: appended.evicted ?? [] } : {}),
        ...(appended.fork ? { fork: appended.fork } : {}),
      };
    });
  }

  /** Store (or find) the turn's user entry → {index, length, entryId, sessionId, kept?, evicted?, fork?}. */
  async function placeUserEntry(mode, built) {
    if (mode.kind === 'append') return storage.history.append({ entry: built.userEntry });
    if (mode.kind === 'branch') {
      const r = await storage.history.branch({ index: mode.index, entry: built.userEntry });
      return { ...r, fork: { forkEntryId: r.forkEntryId, chosen: r.chosen, versions: r.versions } };
    }
    // retry / regenerate: the entry is stored already
    const meta = await storage.history.meta();
    return {
      index: built.res.retry?.index ?? mode.userIndex ?? mode.index,
      length: meta.length,
      entryId: built.res.retry?.entryId ?? null,
      sessionId: meta.activeSessionId || null,
    };
  }

  /** chat.start once the user entry is stored, then in one delta whatever streamed before it. */
  function announce(stream) {
    stream.announced = true;
    emit(stream, { type: 'chat.start', streamId: stream.streamId, userIndex: stream.userIndex });
    if (stream.text) {
      emit(stream, { type: 'chat.delta', streamId: stream.streamId, delta: stream.text, length: stream.text.length });
    }
  }

  function abortedError(stream) {
    return Object.assign(new Error(stream.stopReason === 'stop' ? t('turnStopped') : t('turnAborted')), {
      kind: 'aborted',
      partial: '',
    });
  }

  /** The stream ended before the provider's terminal event: salvaged like a broken connection. */
  function truncatedError() {
    return Object.assign(new Error(t('turnTruncated')), {
      kind: 'network',
      code: 'truncated',
      partial: '',
    });
  }

  // ----- agent sessions (the `agent` kind, agent-sessions.js)

  /** Before a turn is built: this chat's agent session on the card's server, if it has one. */
  async function agentFor(provider) {
    const meta = await storage.history.meta();
    const chatId = meta.activeSessionId || '';
    return { baseUrl: provider.baseUrl, sessionId: await agentSessions.lookup(chatId, provider.baseUrl), chatHasEntries: meta.length > 0, renewed: false };
  }

  /**
   * A session on the agent server for the stream's chat: a new one when it has none (remembered for
   * the chat the turn was stored in, once it is stored).
   */
  async function ensureAgentSession(stream) {
    if (stream.agent.sessionId) return;
    const id = await createAgentSession(stream.provider, { signal: stream.controller.signal, ...(fetchImpl ? { fetchImpl } : {}) });
    if (!(await stream.ready)) throw abortedError(stream);
    stream.agent.sessionId = id;
    if (stream.originSessionId) await agentSessions.remember(stream.originSessionId, stream.agent.baseUrl, id);
  }

  /** callLlm, and for the `agent` kind once more in a new session (backfilled) when the server lost the chat's. */
  async function callLlm(stream, payload) {
    if (!stream.agent) return callProvider(stream, payload);
    await ensureAgentSession(stream);
    try {
      return await callProvider(stream, payload);
    } catch (e) {
      const gone = e?.kind === 'http' && e?.status === 404 && e?.providerType === AGENT_SESSION_GONE;
      if (!gone || stream.agent.renewed || stream.controller.signal.aborted || !isBlank(stream.text)) throw e;
      stream.agent.renewed = true;
      stream.agent.sessionId = null;
      await ensureAgentSession(stream);
      const built = await rebuild(stream, { backfill: true });
      stream.payload = built.payload;
      return callProvider(stream, built.payload);
    }
  }

  /** One provider call with `payload` ({body} or {bodyText}, buildRequest). */
  async function callProvider(stream, payload) {
    if (stream.controller.signal.aborted) throw abortedError(stream);
    let passText = '';
    const res = await llm.streamReply({
      provider: stream.provider,
      ...payload,
      ...(stream.agent?.sessionId ? { agentSessionId: stream.agent.sessionId } : {}),
      signal: stream.controller.signal,
      onDelta: (d) => {
        const delta = typeof d === 'string' ? d : (d?.delta ?? d?.text ?? '');
        if (!delta) return;
        passText += delta;
        stream.text += delta;
        if (!stream.announced) return; // announce() sends it
        emit(stream, { type: 'chat.delta', streamId: stream.streamId, delta, length: stream.text.length });
      },
      onEvent: () => {},
      ...(fetchImpl ? { fetchImpl } : {}),
    });
    // the reply's own text wins over what the deltas accumulated
    const text = typeof res?.text === 'string' ? res.text : passText;
    if (text !== passText) stream.text = stream.text.slice(0, stream.text.length - passText.length) + text;
    return { ...res, text };
  }

  /** upTo/source for a rebuild after this turn's user entry was appended (§8.1 step 1). */
  async function locateTurn(stream) {
    if (stream.bg && stream.originSessionId) {
      try {
        const s = await storage.sessions.get({ id: stream.originSessionId, images: 'ref' });
        const i = findUserEntryIndex(s.entries, stream.userText, -1);
        return { upTo: i >= 0 ? i : s.entries.length, source: { sessionId: stream.originSessionId } };
      } catch {
        /* the session is gone: build from the live history */
      }
    }
    const h = await storage.history.get({ images: 'ref' });
    const i = findUserEntryIndex(h.entries, stream.userText, stream.userIndex);
    return { upTo: i >= 0 ? i : stream.userIndex };
  }

  async function rebuild(stream, extra) {
    const where = await locateTurn(stream);
    const built = await buildRequest({ ...stream.baseArgs, ...where, ...extra });
    if (built.hasImages) stream.markImages = true;
    return built;
  }

  /** callLlm → `{first}` or `{error}` (never rejects). */
  function attempt(stream, payload) {
    return callLlm(stream, payload).then(
      (first) => ({ first }),
      (error) => ({ error }),
    );
  }

  async function runTurn(stream) {
    // the first call goes out while the user entry is appended; a delta that does not verify is
    // rebuilt once that entry is stored (after it, as a rescue is)
    const early = stream.bodyCheck
      ? stream.bodyCheck.then((ok) => (ok ? attempt(stream, stream.payload) : { stale: true }))
      : attempt(stream, stream.payload);
    if (!(await stream.ready)) {
      await early; // aborted by startTurn: the send failed, nothing to report or store
      return;
    }
    let first;
    let originalError = null;
    try {
      let got = await early;
      if (got.stale) {
        stream.payload = (await rebuild(stream, {})).payload;
        got = await attempt(stream, stream.payload);
      }
      // at most one overflow rescue (§7.3)
      while (!got.first) {
        const e = got.error;
        if (stream.dropped) throw e;
        if (originalError) throw e;
        if (!mayRescue(e, { kind: stream.provider.kind, rescued: !!stream.rescue, text: stream.text })) throw e;
        let overflow = false;
        try {
          overflow = (await storage.request.isContextOverflow({ message: e.message })) === true;
        } catch {
          overflow = false;
        }
        if (!overflow) throw e;
        originalError = e;
        stream.phase = 'rescue';
        emit(stream, { type: 'chat.progress', streamId: stream.streamId, stage: 'rescue', done: 0, total: 1 });
        let built;
        try {
          built = await rebuild(stream, { rescue: { errorMessage: e.message } });
        } catch {
          throw e;
        }
        if (!built.res.rescue?.applied) throw e;
        stream.rescue = {
          errorMessage: e.message,
          attachIds: (built.res.rescue.changed ?? []).map((c) => c?.attachId).filter((id) => typeof id === 'string' && id),
        };
        stream.payload = built.payload;
        stream.phase = 'streaming';
        got = await attempt(stream, stream.payload);
      }
      first = got.first;
    } catch (e) {
      // a failed rescue retry shows the original error unless the retry was aborted
      const shown = originalError && (e?.kind === 'http' || e?.kind === 'protocol') ? originalError : e;
      return finishError(stream, shown);
    }

    if (first.truncated) return finishError(stream, truncatedError());
    let text = first.text;
    let finishReason = first.finishReason ?? 'other';
    // continuation second pass (§8.7), at most once
    if (finishReason === 'length' && !stream.controller.signal.aborted) {
      try {
        stream.phase = 'continuation';
        emit(stream, { type: 'chat.progress', streamId: stream.streamId, stage: 'continuation', done: 0, total: 1 });
        const built = await rebuild(stream, {
          pass: { kind: 'continuation', previousReply: first.text, instruction: CONTINUATION_INSTRUCTION },
          ...(stream.rescue ? { rescue: { errorMessage: stream.rescue.errorMessage } } : {}),
        });
        const second = await callLlm(stream, built.payload);
        if (second.truncated) return finishError(stream, truncatedError());
        text = first.text + second.text;
        finishReason = second.finishReason ?? 'other';
      } catch (e) {
        if (stream.dropped || ['aborted', 'idle', 'network'].includes(e?.kind)) return finishError(stream, e);
        // the continuation failed outright: keep the complete first part (plus anything streamed)
        text = stream.text || first.text;
      }
    }
    if (stream.dropped) return finishError(stream, abortedError(stream));
    return finishSuccess(stream, text, finishReason);
  }



  /**
   * Append through the stream's routing: live history, or sessions.appendTo for a hand-off. With
   * `copyVideoSrc` the host copies the newest `videoSrc` of where the entry lands (§9 "Turns").
   */
  async function route(stream, entry, { markImagesSeen = false, copyVideoSrc = false } = {}) {
    if (stream.replaceAt) {
      const placed = await placeNewVersion(stream, entry, { markImagesSeen });
      if (placed) return placed;
    }
    // the session the turn was sent in (docs/keeps.md): live when it still is the live chat,
    // else that session, or its trash item when it was deleted meanwhile
    const origin = stream.originSessionId;
    const handoff = !!origin;
    const append = (e, copy) => {
      const flags = { ...(copy ? { copyVideoSrc: true } : {}), ...(markImagesSeen ? { markImagesSeen: true } : {}) };
      if (handoff) return storage.sessions.appendTo({ id: origin, entry: e, ...flags });
      return storage.history.append({ entry: e, ...flags });
    };
    const r = await append(entry, copyVideoSrc);
    if (handoff) {
      return { index: r.index, length: r.length, target: r.target, sessionId: r.target === 'live' ? undefined : r.sessionId };
    }
    return { index: r.index, length: r.length, target: 'live' };
  }

  /**
   * Regenerate's reply: the reply it replaces becomes another version and this one continues the
   * chat (history.branch), when that reply is still where it was in the live chat; else null (the
   * caller appends it to the turn's session: nothing is lost).
   */
  async function placeNewVersion(stream, entry, { markImagesSeen }) {
    const { index, entryId } = stream.replaceAt;
    try {
      const h = await storage.history.get({ from: index, limit: 1, images: 'ref' });
      const still = h.entries?.[0]?.entryId === entryId && h.activeSessionId === stream.originSessionId;
      if (!still) return null;
      const r = await storage.history.branch({ index, entry, ...(markImagesSeen ? { markImagesSeen: true } : {}) });
      return { index: r.index, length: r.length, target: 'live', fork: { forkEntryId: r.forkEntryId, chosen: r.chosen, versions: r.versions } };
    } catch (e) {
      if (e?.code === 'bad_request' || e?.code === 'not_found') return null;
      throw e;
    }
  }

  async function finishSuccess(stream, text, finishReason) {
    stream.phase = 'saving';
    const content = stripChoiceBlocks(text).trim();
    if (content === '') {
      emit(stream, {
        type: 'chat.error',
        streamId: stream.streamId,
        error: { code: 'empty_reply', message: t('turnEmptyReply'), kind: 'protocol' },
        salvagedIndex: null,
      });
      return;
    }
    await lock.run(async () => {
      const entry = { role: 'assistant', content, providerLabel: stream.providerLabel, providerKey: stream.providerKey };
      let placed;
      try {
        placed = await route(stream, entry, { markImagesSeen: stream.markImages, copyVideoSrc: true });
      } catch (e) {
        emit(stream, {
          type: 'chat.error',
          streamId: stream.streamId,
          error: errorInfo(e),
          salvagedIndex: null,
          text: content,
        });
        return;
      }
      if (stream.rescue?.attachIds.length) {
        try {
          await storage.request.commitRescue({
            attachIds: stream.rescue.attachIds,
            ...(placed.sessionId ? { sessionId: placed.sessionId } : {}),
          });
        } catch {
          /* the reply is stored; the stub is re-sent next time */
        }
      }
      stream.phase = 'done';
      emit(stream, {
        type: 'chat.done',
        streamId: stream.streamId,
        index: placed.index,
        length: placed.length,
        finishReason,
        target: placed.target,
        ...(placed.fork ? { fork: placed.fork } : {}),
      });
    });
  }

  async function finishError(stream, e) {
    stream.phase = 'error';
    if (stream.dropped) {
      emit(stream, {
        type: 'chat.error',
        streamId: stream.streamId,
        error: { code: 'dropped', message: t('turnDropped'), kind: 'aborted' },
        salvagedIndex: null,
      });
      return;
    }
    const partial = !isBlank(stream.text) ? stream.text : typeof e?.partial === 'string' ? e.partial : '';
    const stopped = stream.stopReason === 'stop';
    const info = errorInfo(e, { stopped });
    // a failed regenerate stores nothing (the reply it would replace stays); a stopped one keeps
    // what it wrote as a version
    if (isBlank(partial) || (stream.replaceAt && !stopped)) {
      const failed = stopped || stream.replaceAt ? null : await markFailed(stream, info);
      emit(stream, { type: 'chat.error', streamId: stream.streamId, error: info, salvagedIndex: null, ...(failed ? { failed } : {}) });
      return;
    }
    // abort salvage (§9): stop, idle timeout, network — any error that left streamed text
    await lock.run(async () => {
      const entry = {
        role: 'assistant',
        content: partial.trim(),
        interrupted: true,
        providerLabel: stream.providerLabel,
        providerKey: stream.providerKey,
      };
      try {
        const placed = await route(stream, entry);
        stream.salvagedIndex = placed.index;
        emit(stream, {
          type: 'chat.error',
          streamId: stream.streamId,
          error: info,
          salvagedIndex: placed.index,
          target: placed.target,
        });
      } catch (w) {
        emit(stream, {
          type: 'chat.error',
          streamId: stream.streamId,
          error: { ...info, storage: errorInfo(w) },
          salvagedIndex: null,
          text: entry.content,
        });
      }
    });
  }

  /**
   * A request that failed with nothing streamed leaves its user message marked failed (stored:
   * the panel shows the mark and Retry), when that message is still in the live chat.
   */
  async function markFailed(stream, info) {
    if (!stream.userEntryId) return null;
    try {
      const r = await storage.history.markFailed({
        entryId: stream.userEntryId,
        code: String(info?.code || info?.kind || 'error').slice(0, 200),
        message: String(info?.message || t('turnRequestFailed')).slice(0, 2000),
      });
      return { index: r.index, code: info?.code ?? null, message: info?.message ?? '' };
    } catch {
      return null; // no longer live (the chat was switched or deleted): nothing to mark here
    }
  }

  // ----- stop / drop / hand-off

  function drop(stream) {
    stream.dropped = true;
    stream.controller.abort();
  }

  async function stop({ streamId } = {}) {
    const s = streamId ? streams.get(streamId) : foreground();
    if (!s || s.settled) return { stopped: false };
    s.stopReason = 'stop';
    s.controller.abort();
    await s.done;
    return { stopped: true, salvagedIndex: s.salvagedIndex };
  }

  /** §9 "Load S"/"New session": hand the foreground stream off to the saved id, or drop it. */
  function handOff(saved) {
    const fg = foreground();
    if (!fg) return { handedOff: null, dropped: null };
    if (saved && typeof saved.id === 'string' && saved.id !== '') {
      fg.bg = true;
      fg.originSessionId = saved.id;
      return { handedOff: fg.streamId, dropped: null };
    }
    drop(fg);
    return { handedOff: null, dropped: fg.streamId };
  }

  async function loadSession({ id } = {}) {
    if (typeof id !== 'string' || id === '') throw codeError('bad_request', 'chat.loadSession needs a session id'); // i18n-ok: programming error
    return lock.run(async () => {
      const res = await storage.sessions.load({ id, saveCurrent: true }); // not_found: nothing changed
      const moved = handOff(res.saved);
      // resume S's own in-flight stream (also the one just handed off when S was the bound session)
      let resumed = null;
      for (const s of streams.values()) {
        if (s.bg && !s.settled && s.originSessionId === id && !resumed) {
          s.bg = false; // re-attached: its events reach the panel again
          resumed = s;
        }
      }
      return { length: res.length, saved: res.saved ?? null, ...moved, stream: resumed ? publicStream(resumed) : null };
    });
  }

  async function newSession() {
    return lock.run(async () => {
      const res = await storage.history.clear({ saveCurrent: true });
      const moved = handOff(res.saved);
      return { saved: res.saved ?? null, ...moved };
    });
  }

  function state() {
    const fg = foreground();
    const background = [];
    for (const s of streams.values()) if (s.bg && !s.settled) background.push(publicStream(s));
    // a stream whose user entry is not stored yet has not started for the panel (no chat.start)
    return { stream: fg?.announced ? publicStream(fg) : null, background };
  }

  // ----- resend

  /** Edit & resend: the turn from `fromIndex` on is kept as another version (history.branch). */
  async function resend({ fromIndex, text, images } = {}) {
    if (!Number.isInteger(fromIndex) || fromIndex < 0) throw codeError('bad_request', 'chat.resend needs fromIndex');
    return withSendSlot(() => startTurn({ text, images }, { kind: 'branch', index: fromIndex }));
  }

  /** Regenerate the assistant reply at `index`: its user message is sent again (nothing appended). */
  async function regenerate({ index } = {}) {
    if (!Number.isInteger(index) || index < 0) throw codeError('bad_request', 'chat.regenerate needs the index of a reply'); // i18n-ok: programming error
    return withSendSlot(async () => {
      const h = await storage.history.get({ images: 'ref' });
      const reply = h.entries?.[index];
      if (!reply || reply.role !== 'assistant') throw codeError('bad_request', t('turnNoReplyToRegenerate'));
      let userIndex = index - 1;
      while (userIndex >= 0 && h.entries[userIndex]?.role !== 'user') userIndex--;
      if (userIndex < 0) throw codeError('bad_request', t('turnNoUserMessageBefore'));
      return startTurn({}, { kind: 'regenerate', index, userIndex, replacedEntryId: reply.entryId ?? null });
    });
  }

  /** Retry a failed message: the stored user entry at `index` is sent again (no second copy). */
  async function retry({ index } = {}) {
    if (!Number.isInteger(index) || index < 0) throw codeError('bad_request', 'chat.retry needs the index of your message'); // i18n-ok: programming error
    return withSendSlot(() => startTurn({}, { kind: 'retry', index }));
  }

  // ----- tab helpers (screenshots are captured and attached by the side panel: sidepanel/pixels.js)

  async function seek({ tabId, seconds } = {}) {
    if (!Number.isInteger(tabId)) throw codeError('bad_request', 'chat.seek needs a tabId');
    const secs = Number(seconds);
    if (!Number.isFinite(secs) || secs < 0) throw codeError('bad_request', 'chat.seek needs seconds ≥ 0'); // i18n-ok: programming error
    const [inj] = await chrome.scripting.executeScript({ target: { tabId }, func: seekScript, args: [secs] });
    return { ok: inj?.result === true };
  }

  return {
    send: (msg) => withSendSlot(() => startTurn(msg)),
    /** sw.js: a page's host call relayed by this worker (SettingsMemory.relayed). */
    relayed: (op, done) => settingsMemory.relayed(op, done),
    stop,
    state,
    resend,
    regenerate,
    retry,
    attachPage,
    loadSession,
    newSession,
    seek,
    /** Resolves when every running turn and summary has settled (tests). */
    async idle() {
      while (pending.size) await Promise.allSettled([...pending]);
    },
  };
}

/** Wire the worker chat handlers (README table) into sw.js's handler map. */
export function installTurnHandlers(register, ctx, deps = {}) {
  const turns = createTurns({ storage: ctx.storage, broadcast: ctx.broadcast, events: ctx.port, siteCache: ctx.siteCache, ...deps });
  register('chat.send', (msg) => turns.send(msg));
  register('chat.stop', (msg) => turns.stop(msg));
  register('chat.state', () => turns.state());
  register('chat.resend', (msg) => turns.resend(msg));
  register('chat.regenerate', (msg) => turns.regenerate(msg));
  register('chat.retry', (msg) => turns.retry(msg));
  register('chat.attachPage', (msg) => turns.attachPage(msg));
  register('chat.loadSession', (msg) => turns.loadSession(msg));
  register('chat.newSession', () => turns.newSession());
  register('chat.seek', (msg) => turns.seek(msg));
  return turns;
}
