// Agent providers (issue 21): the `runs` and `agent` request kinds of request.build (storage-model §8.5,
// §8.6), spoken to two real agent servers. lib/llm.js's streamReply, listModels and ping hand these
// kinds to this module, so the turn engine drives them like the other kinds: the same results
// ({text, finishReason, usage?, truncated, reasoning?}) and the same LlmError kinds, with `partial`.
//
// `runs` — Hermes Agent's API server (NousResearch/hermes-agent, gateway/platforms/api_server_runs.py;
// default address 127.0.0.1:8642, DEFAULT_PORT in api_server.py). What the code there does, and what
// this client relies on:
//   POST {base}/v1/runs  {input, conversation_history, instructions?, model?}  (Bearer API_SERVER_KEY)
//        → 202 {run_id, status: "started"}; `input` must be non-empty ("Missing 'input' field", 400)
//   GET  {base}/v1/runs/{run_id}/events  text/event-stream of `data: {json}` frames, each
//        {event, run_id, timestamp, …}: `message.delta` {delta}, `reasoning.available` {text},
//        `tool.started` {tool, preview}, `tool.completed` {tool, duration, error}, then one terminal
//        `run.completed` {output, usage: {input_tokens, output_tokens, total_tokens}}, `run.failed`
//        {error} or `run.cancelled`; then the stream closes (`: stream closed`; `data: [DONE]` is
//        accepted too). `: keepalive` comments every 30 s.
//   POST {base}/v1/runs/{run_id}/stop  interrupts the run (Stop here sends it, best effort).
//   GET  {base}/health → {"status": "ok", "platform": "hermes-agent"} (no key); GET {base}/v1/models
//        → an OpenAI model list (key required). A base URL ending in /v1 is accepted.
//
// `agent` — opencode's server (`opencode serve`, default http://127.0.0.1:4096; sst/opencode, now
// anomalyco/opencode, packages/opencode/src/server). It keeps the transcript itself; Keepsake sends
// one turn at a time into a session it created:
//   POST {base}/session {title?} → the session {id, …}
//   POST {base}/session/{id}/prompt_async {parts: [{type: "text", text}, {type: "file", mime,
//        filename, url: "data:…"}…], model?: {providerID, modelID}} → 204 at once; 404 when the
//        session does not exist (NotFoundError {name, data: {message}}).
//   GET  {base}/event  text/event-stream of `data: {type, properties}`: first `server.connected`,
//        then bus events: `message.updated` {info: {id, sessionID, role, tokens: {input, output},
//        error?: {name, data: {message}}, finish?}}, `message.part.updated` {part: {id, messageID,
//        sessionID, type: "text"|"reasoning"|"tool"|…, text}, delta?} (the part's whole text so far;
//        older servers add `delta`), `message.part.delta` {sessionID, messageID, partID, field,
//        delta} (newer servers stream text this way), `session.status` {sessionID, status: {type:
//        "busy"|"idle"|"retry"}}, `session.idle` {sessionID}, `session.error` {sessionID?, error}.
//        The stream is opened before the prompt is sent (its first event says it is subscribed).
//   POST {base}/session/{id}/abort  stops the session's work (Stop here sends it, best effort).
//   GET  {base}/global/health → {healthy, version} (older servers: GET {base}/config, JSON);
//   GET  {base}/config/providers → {providers: [{id, models: {<modelID>: …}}], default}.
// Every route honours OPENCODE_SERVER_PASSWORD as HTTP Basic auth (user `opencode`, or
// OPENCODE_SERVER_USERNAME): a card's API key is that password, or `user:password`.
// Events of other sessions are ignored, and so are the parts of the user's own message (its role
// comes from `message.updated`); the reply is the assistant's text parts in order, joined by a
// blank line. The turn is done when the session goes idle after it was busy (or had a reply).
// A card's model `provider/model` becomes `{providerID, modelID}`; without a slash none is sent
// (the server's default).
//
// Every request is made with `redirect: 'manual'` (lib/llm.js "Redirects").

import { t } from './i18n.js';
import {
  LlmError,
  NO_REDIRECT,
  callContext,
  createSseParser,
  describeThrown,
  extractError,
  isRedirect,
  parseRetryAfter,
  pingClock,
  readCapped,
  redirectError,
  shownUrl,
} from './llm.js';

export const AGENT_KINDS = Object.freeze(['runs', 'agent']);
export const AGENT_DEFAULT_BASE = Object.freeze({ runs: 'http://127.0.0.1:8642', agent: 'http://127.0.0.1:4096' });
/** `providerType` of the http error a prompt to a session the server no longer has gets. */
export const AGENT_SESSION_GONE = 'agent_session_gone';

const ERROR_BODY_CAP = 64 * 1024;
const CONTROL_TIMEOUT_MS = 5000;
const defaultFetch = (...args) => globalThis.fetch(...args);

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** The server's root for a card: no trailing slashes; for `runs` a trailing `/v1` is dropped. */
export function agentBase(provider) {
  let b = String(provider?.baseUrl ?? '').trim() || AGENT_DEFAULT_BASE[provider?.kind] || '';
  let end = b.length;
  while (end > 0 && b[end - 1] === '/') end--;
  b = b.slice(0, end);
  if (provider?.kind === 'runs' && b.toLowerCase().endsWith('/v1')) b = b.slice(0, -3);
  return b;
}

function base64(s) {
  const bytes = new TextEncoder().encode(s);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** Request headers: Bearer key for `runs`, Basic auth (`opencode:<key>` or the key as `user:pass`) for `agent`. */
export function agentHeaders(provider, accept = 'application/json') {
  const h = { 'content-type': 'application/json', accept };
  const key = typeof provider?.apiKey === 'string' ? provider.apiKey.trim() : '';
  if (key) h.authorization = provider.kind === 'agent' ? `Basic ${base64(key.includes(':') ? key : `opencode:${key}`)}` : `Bearer ${key}`; // i18n-ok: HTTP auth schemes
  return h;
}

/** `provider/model` → `{providerID, modelID}`; null without a slash. */
export function opencodeModel(model) {
  const m = String(model ?? '').trim();
  const i = m.indexOf('/');
  if (i <= 0 || i === m.length - 1) return null;
  return { providerID: m.slice(0, i), modelID: m.slice(i + 1) };
}

const EXT = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/gif': 'gif', 'image/webp': 'webp', 'image/svg+xml': 'svg' };

/** The prompt_async body of a host-built agent body `{text, images}` (§8.6). */
export function opencodeEnvelope(body, model) {
  const text = typeof body?.text === 'string' ? body.text : '';
  const parts = [{ type: 'text', text }];
  const images = Array.isArray(body?.images) ? body.images.filter((u) => typeof u === 'string' && u) : [];
  images.forEach((url, i) => {
    let mime = 'image/png';
    if (url.slice(0, 5).toLowerCase() === 'data:') {
      const end = url.search(/[;,]/);
      if (end > 5) mime = url.slice(5, end).toLowerCase();
    }
    parts.push({ type: 'file', mime, filename: `image-${i + 1}.${EXT[mime] ?? 'bin'}`, url });
  });
  const out = { parts };
  const mdl = opencodeModel(model);
  if (mdl) out.model = mdl;
  return out;
}

function bodyObject(body, bodyText) {
  if (typeof bodyText === 'string') {
    try {
      const j = JSON.parse(bodyText);
      if (isObject(j)) return j;
    } catch {
      /* fall through */
    }
    throw new LlmError('protocol', 'The request body is not a JSON object'); // i18n-ok: a programming error (the host builds the body)
  }
  return isObject(body) ? { ...body } : {};
}

/** An error body's message: opencode's `{name, data: {message}}`, else lib/llm.js's extractError. */
export function agentErrorOf(status, text, statusText = '') {
  try {
    const j = JSON.parse(String(text ?? ''));
    const m = j?.data?.message ?? j?.error?.data?.message;
    if (typeof m === 'string' && m) return { message: m, providerType: typeof j?.name === 'string' ? j.name : undefined };
  } catch {
    /* not JSON */
  }
  return extractError(status, text, statusText);
}

function errorText(err) {
  if (typeof err === 'string') return err;
  const m = err?.data?.message ?? err?.message;
  return typeof m === 'string' && m ? m : String(err?.name ?? t('agentUnknownError'));
}

// ------------------------------------------------------------------------------------------------ calls

/** One streamed call's plumbing (lib/llm.js's `callContext`), with the agent server's words. */
function agentCall({ signal, idleMs, fetchImpl }) {
  return callContext({
    signal,
    idleMs,
    fetchImpl,
    idleMessage: (secs) => t('providerIdle', secs),
    unreachable: (url, e) => t('agentUnreachable', shownUrl(url), describeThrown(e)),
  });
}

/** fetch → the response when 2xx; else the LlmError (redirect, http with the server's message, network). */
async function request(cx, url, init) {
  let res;
  try {
    res = await cx.race(cx.fetch(url, init));
  } catch (e) {
    throw cx.map(e, url);
  }
  cx.arm();
  if (isRedirect(res)) throw redirectError(res, url);
  if (!res.ok) {
    let text = '';
    try {
      text = await cx.race(readCapped(res, ERROR_BODY_CAP));
    } catch (e) {
      if (cx.why) throw cx.map(e, url);
    }
    const { message, providerType } = agentErrorOf(res.status, text, res.statusText);
    throw new LlmError('http', message, { status: res.status, providerType, retryAfter: parseRetryAfter(res.headers?.get?.('retry-after')) });
  }
  return res;
}

async function readJson(cx, res, url) {
  let text;
  try {
    text = await cx.race(res.text());
  } catch (e) {
    throw cx.map(e, url);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new LlmError('protocol', t('providerBadJson', shownUrl(url)));
  }
}

function parseEvent(data) {
  try {
    return JSON.parse(data);
  } catch {
    throw new LlmError('protocol', t('providerMalformedEvent', data.slice(0, 120)));
  }
}

/**
 * Read an event stream until `isDone()` or its end: `onEvent` gets each SSE event. → true when the
 * stream ended before `isDone()` (EOF).
 */
async function pumpSse(cx, res, url, onEvent, isDone) {
  const ctype = String(res.headers?.get?.('content-type') ?? '').toLowerCase();
  if (!ctype.includes('text/event-stream')) {
    res.body?.cancel?.().catch(() => {});
    throw new LlmError('protocol', t('providerNotEventStream', shownUrl(url), ctype.split(';')[0] || '—'));
  }
  const parser = createSseParser(onEvent);
  const decoder = new TextDecoder('utf-8');
  const reader = res.body.getReader();
  cx.readers.add(reader);
  try {
    while (!isDone()) {
      let r;
      try {
        r = await cx.race(reader.read());
      } catch (e) {
        if (cx.why) throw cx.map(e, url);
        throw new LlmError('network', t('providerStreamBroke', shownUrl(url), describeThrown(e)), { cause: e });
      }
      if (r.done) break;
      cx.arm();
      parser.push(decoder.decode(r.value, { stream: true }));
    }
    if (!isDone()) {
      parser.push(decoder.decode());
      parser.end();
    }
    return !isDone();
  } finally {
    cx.readers.delete(reader);
    reader.cancel().catch(() => {});
  }
}

/** A control request (stop, abort) that must not hold Stop up: best effort, bounded. */
async function control(fetchImpl, url, headers) {
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), CONTROL_TIMEOUT_MS);
  try {
    const res = await fetchImpl(url, { method: 'POST', headers, body: '{}', signal: ctrl.signal, ...NO_REDIRECT });
    await res.body?.cancel?.().catch(() => {});
  } catch {
    /* best effort */
  } finally {
    clearTimeout(timer);
  }
}

function replyState(onDelta, onEvent) {
  const s = { text: '', reasoning: '' };
  const safe = (fn, ...a) => {
    if (typeof fn !== 'function') return;
    try {
      fn(...a);
    } catch (e) {
      console.error('llm listener failed', e);
    }
  };
  return {
    s,
    text(d) {
      s.text += d;
      safe(onDelta, d, s.text);
    },
    reasoning(d) {
      s.reasoning += d;
      safe(onEvent, { type: 'reasoning', delta: d });
    },
    event(e) {
      safe(onEvent, e);
    },
  };
}

function usageOf(input, output) {
  const u = {};
  if (Number.isFinite(input)) u.inputTokens = input;
  if (Number.isFinite(output)) u.outputTokens = output;
  return Object.keys(u).length ? u : undefined;
}

// ------------------------------------------------------------------------------------------------ runs

/**
 * One Hermes run: POST /v1/runs, then its event stream. Arguments and result as lib/llm.js's
 * streamReply (the body is the host's `runs` body; the card's model is added when set).
 */
export async function streamRuns({ provider, body, bodyText, signal, onDelta, onEvent, fetchImpl = defaultFetch, idleMs = 60_000 }) {
  const st = replyState(onDelta, onEvent);
  const withPartial = (e) => {
    e.partial = st.s.text;
    return e;
  };
  if (signal?.aborted) throw withPartial(new LlmError('aborted', t('llmAborted')));
  const base = agentBase(provider);
  const b = bodyObject(body, bodyText);
  if (provider.model) b.model = provider.model;
  const cx = agentCall({ signal, idleMs, fetchImpl });
  let runId = null;
  let url = `${base}/v1/runs`;
  try {
    cx.arm();
    const res = await request(cx, url, { method: 'POST', headers: agentHeaders(provider), body: JSON.stringify(b) });
    const started = await readJson(cx, res, url);
    runId = typeof started?.run_id === 'string' && started.run_id ? started.run_id : null;
    if (!runId) throw new LlmError('protocol', t('runsNoRunId', shownUrl(url)));
    st.event({ type: 'run.started', data: started });
    url = `${base}/v1/runs/${encodeURIComponent(runId)}/events`;
    const events = await request(cx, url, { method: 'GET', headers: agentHeaders(provider, 'text/event-stream') });
    let done = false;
    let usage;
    const eof = await pumpSse(
      cx,
      events,
      url,
      (evt) => {
        if (done) return;
        const data = evt.data.trim();
        if (!data) return;
        if (data === '[DONE]') {
          done = true;
          return;
        }
        const j = parseEvent(data);
        const type = typeof j?.event === 'string' ? j.event : evt.event;
        st.event({ type, data: j });
        switch (type) {
          case 'message.delta':
            if (typeof j.delta === 'string' && j.delta) st.text(j.delta);
            break;
          case 'reasoning.available':
            if (typeof j.text === 'string' && j.text) st.reasoning(j.text);
            break;
          case 'tool.started':
          case 'tool.completed':
            st.event({ type: 'tool', phase: type === 'tool.started' ? 'started' : 'completed', tool: j.tool, preview: j.preview, duration: j.duration, error: j.error === true });
            break;
          case 'run.completed':
            // the output is the whole reply: it stands in when no delta came
            if (!st.s.text && typeof j.output === 'string' && j.output) st.text(j.output);
            usage = usageOf(j.usage?.input_tokens, j.usage?.output_tokens);
            done = true;
            break;
          case 'run.failed':
            throw new LlmError('protocol', t('runsFailed', errorText(j.error ?? t('agentUnknownError'))), { providerType: 'run.failed' });
          case 'run.cancelled':
            throw new LlmError('protocol', t('runsCancelled'), { providerType: 'run.cancelled' });
          default:
            break; // approval.request, subagent.*, run.steered, future events
        }
      },
      () => done,
    );
    const out = { text: st.s.text, finishReason: eof ? 'other' : 'stop', truncated: eof };
    if (usage) out.usage = usage;
    if (st.s.reasoning) out.reasoning = st.s.reasoning;
    return out;
  } catch (e) {
    const err = e instanceof LlmError && !cx.why ? e : cx.map(e, url);
    if (runId && (err.kind === 'aborted' || err.kind === 'idle')) {
      await control(fetchImpl, `${base}/v1/runs/${encodeURIComponent(runId)}/stop`, agentHeaders(provider));
    }
    throw withPartial(err);
  } finally {
    cx.close();
  }
}

// ------------------------------------------------------------------------------------------------ agent

/**
 * A new opencode session → its id. Throws LlmError (http, network, protocol, aborted).
 * @param {{kind: 'agent', baseUrl?: string, apiKey?: string}} provider
 */
export async function createAgentSession(provider, { fetchImpl = defaultFetch, signal, title, idleMs = 60_000 } = {}) {
  const cx = agentCall({ signal, idleMs, fetchImpl });
  const url = `${agentBase(provider)}/session`;
  try {
    if (signal?.aborted) throw new LlmError('aborted', t('llmAborted'));
    cx.arm();
    const res = await request(cx, url, { method: 'POST', headers: agentHeaders(provider), body: JSON.stringify(title ? { title } : {}) });
    const j = await readJson(cx, res, url);
    if (typeof j?.id !== 'string' || !j.id) throw new LlmError('protocol', t('agentNoSessionId', shownUrl(url)));
    return j.id;
  } catch (e) {
    throw e instanceof LlmError && !cx.why ? e : cx.map(e, url);
  } finally {
    cx.close();
  }
}

/**
 * One turn into an opencode session: the event stream is opened, the prompt sent with
 * prompt_async, the reply read from the events until the session is idle. `agentSessionId` names
 * the session (without it one is created). Result as lib/llm.js's streamReply plus
 * `agentSessionId`. A session the server does not have: LlmError http 404 with providerType
 * AGENT_SESSION_GONE.
 */
export async function streamAgent({ provider, body, bodyText, agentSessionId, signal, onDelta, onEvent, fetchImpl = defaultFetch, idleMs = 60_000 }) {
  const st = replyState(onDelta, onEvent);
  const withPartial = (e) => {
    e.partial = st.s.text;
    return e;
  };
  if (signal?.aborted) throw withPartial(new LlmError('aborted', t('llmAborted')));
  const base = agentBase(provider);
  const envelope = opencodeEnvelope(bodyObject(body, bodyText), provider.model);
  const sessionId =
    typeof agentSessionId === 'string' && agentSessionId ? agentSessionId : await createAgentSession(provider, { fetchImpl, signal, idleMs });
  const cx = agentCall({ signal, idleMs, fetchImpl });
  let url = `${base}/event`;
  let prompted = false;
  try {
    cx.arm();
    const events = await request(cx, url, { method: 'GET', headers: agentHeaders(provider, 'text/event-stream') });
    const roles = new Map(); // messageID → role
    const parts = new Map(); // partID → {messageID, type, text, sent}
    const order = [];
    let live = null; // the text part now streaming
    let busy = false;
    let done = false;
    let finish = null;
    let usage;
    let connected;
    const subscribed = new Promise((resolve) => {
      connected = resolve;
    });
    const partOf = (id, messageID, type) => {
      let p = parts.get(id);
      if (!p) {
        p = { messageID, type, text: '', sent: 0 };
        parts.set(id, p);
        order.push(id);
      }
      if (type) p.type = type;
      return p;
    };
    // stream what the assistant's parts hold beyond what was sent (one text part at a time)
    const flush = () => {
      for (const id of order) {
        const p = parts.get(id);
        if (roles.get(p.messageID) !== 'assistant' || p.text.length <= p.sent) continue;
        if (p.type === 'reasoning') {
          st.reasoning(p.text.slice(p.sent));
          p.sent = p.text.length;
        } else if (p.type === 'text') {
          // an earlier part that grows after a later one began is in the final text, not streamed
          if (live !== null && order.indexOf(id) < order.indexOf(live)) continue;
          if (live !== id) {
            if (st.s.text) st.text('\n\n');
            live = id;
          }
          st.text(p.text.slice(p.sent));
          p.sent = p.text.length;
        }
      }
    };
    const handle = (evt) => {
      connected();
      if (done) return;
      const data = evt.data.trim();
      if (!data) return;
      const j = parseEvent(data);
      const type = j?.type;
      const p = isObject(j?.properties) ? j.properties : {};
      const sid = p.sessionID ?? p.info?.sessionID ?? p.part?.sessionID;
      if (sid !== sessionId) return; // server.connected, heartbeats, other sessions
      st.event({ type, data: j });
      switch (type) {
        case 'message.updated': {
          const info = p.info;
          if (typeof info?.id !== 'string') break;
          roles.set(info.id, info.role);
          if (info.role !== 'assistant') break;
          busy = true;
          if (info.tokens) usage = usageOf(info.tokens.input, info.tokens.output);
          if (typeof info.finish === 'string') finish = info.finish === 'length' ? 'length' : 'stop';
          if (info.error && !cx.why) {
            throw new LlmError('protocol', t('agentError', errorText(info.error)), { providerType: info.error?.name });
          }
          flush();
          break;
        }
        case 'message.part.updated': {
          const part = p.part;
          if (typeof part?.id !== 'string' || part.synthetic === true) break;
          if (part.type === 'text' || part.type === 'reasoning') {
            const q = partOf(part.id, part.messageID, part.type);
            if (typeof part.text === 'string') q.text = part.text;
            else if (typeof p.delta === 'string') q.text += p.delta;
            flush();
          } else if (part.type === 'tool' && roles.get(part.messageID) === 'assistant') {
            st.event({ type: 'tool', phase: part.state?.status, tool: part.tool });
          }
          break;
        }
        case 'message.part.delta': {
          const q = parts.get(p.partID);
          if (!q || (p.field ?? 'text') !== 'text' || typeof p.delta !== 'string') break;
          q.text += p.delta;
          flush();
          break;
        }
        case 'session.status':
          if (p.status?.type === 'busy') busy = true;
          else if (p.status?.type === 'idle' && busy) done = true;
          break;
        case 'session.idle':
          if (busy) done = true;
          break;
        case 'session.error':
          if (!cx.why) throw new LlmError('protocol', t('agentError', errorText(p.error)), { providerType: p.error?.name });
          break;
        default:
          break;
      }
    };
    const pumping = pumpSse(cx, events, url, handle, () => done);
    pumping.catch(() => {});
    // prompt only once the stream is subscribed (its first event), so no reply event is missed
    await cx.race(Promise.race([subscribed, pumping]));
    url = `${base}/session/${encodeURIComponent(sessionId)}/prompt_async`;
    try {
      const res = await request(cx, url, { method: 'POST', headers: agentHeaders(provider), body: JSON.stringify(envelope) });
      res.body?.cancel?.().catch(() => {});
      prompted = true;
    } catch (e) {
      if (e instanceof LlmError && e.kind === 'http' && e.status === 404) {
        throw new LlmError('http', t('agentSessionGone', sessionId), { status: 404, providerType: AGENT_SESSION_GONE, cause: e });
      }
      throw e;
    }
    url = `${base}/event`;
    const eof = await pumping;
    const text = order
      .map((id) => parts.get(id))
      .filter((q) => q.type === 'text' && roles.get(q.messageID) === 'assistant' && q.text)
      .map((q) => q.text)
      .join('\n\n');
    const out = { text: eof ? st.s.text : text, finishReason: eof ? 'other' : (finish ?? 'stop'), truncated: eof, agentSessionId: sessionId };
    if (usage) out.usage = usage;
    if (st.s.reasoning) out.reasoning = st.s.reasoning;
    return out;
  } catch (e) {
    const err = e instanceof LlmError && !cx.why ? e : cx.map(e, url);
    if (prompted && (err.kind === 'aborted' || err.kind === 'idle')) {
      await control(fetchImpl, `${base}/session/${encodeURIComponent(sessionId)}/abort`, agentHeaders(provider));
    }
    err.agentSessionId = sessionId;
    throw withPartial(err);
  } finally {
    cx.close();
  }
}

// ------------------------------------------------------------------------------------------------ models

/**
 * The models an agent server offers, for the panel's switcher: Hermes' `/v1/models`; opencode's
 * `/config/providers` as `provider/model`. Never throws: `{ok: true, models}` or `{ok: false, detail}`.
 */
export async function listAgentModels(provider, fetchImpl = defaultFetch, { timeoutMs = 15_000 } = {}) {
  const base = agentBase(provider);
  const url = provider.kind === 'runs' ? `${base}/v1/models` : `${base}/config/providers`;
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  try {
    const res = await fetchImpl(url, { method: 'GET', headers: agentHeaders(provider), signal: ctrl.signal, ...NO_REDIRECT });
    if (isRedirect(res)) return { ok: false, detail: redirectError(res, url).message };
    const text = await res.text();
    if (!res.ok) return { ok: false, detail: `${agentErrorOf(res.status, text, res.statusText).message} (${shownUrl(url)})` };
    let j = null;
    try {
      j = JSON.parse(text);
    } catch {
      j = null;
    }
    let ids = null;
    if (provider.kind === 'runs' && Array.isArray(j?.data)) ids = j.data.map((m) => m?.id).filter((x) => typeof x === 'string');
    if (provider.kind === 'agent' && Array.isArray(j?.providers)) {
      ids = [];
      for (const p of j.providers) {
        if (typeof p?.id !== 'string') continue;
        const models = Array.isArray(p.models) ? p.models.map((m) => m?.id) : Object.keys(isObject(p.models) ? p.models : {});
        for (const m of models) if (typeof m === 'string' && m) ids.push(`${p.id}/${m}`);
      }
    }
    if (!ids) return { ok: false, detail: t('providerNoModelList', shownUrl(url)) };
    return { ok: true, models: [...new Set(ids)].sort((a, b) => a.localeCompare(b)) };
  } catch (e) {
    if (ctrl.signal.aborted) return { ok: false, detail: t('providerNoAnswer', shownUrl(url), String(Math.round(timeoutMs / 1000))) };
    return { ok: false, detail: t('agentUnreachable', shownUrl(url), describeThrown(e)) };
  } finally {
    clearTimeout(timer);
  }
}

// ------------------------------------------------------------------------------------------------ ping

/**
 * Options' Ping for `runs` (GET /health, then /v1/models with the key) and `agent` (GET
 * /global/health, or /config on older servers). Never throws; a named reason for an HTML page, a
 * 404, a closed port, a redirect. → {ok, ms, detail, status?}
 */
export async function pingAgent(provider, fetchImpl = defaultFetch, { timeoutMs = 20_000 } = {}) {
  const done = pingClock();
  const base = agentBase(provider);
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  let asked = '';
  const get = async (path) => {
    asked = `${base}${path}`;
    const res = await fetchImpl(asked, { method: 'GET', headers: agentHeaders(provider), signal: ctrl.signal, ...NO_REDIRECT });
    if (isRedirect(res)) throw redirectError(res, asked);
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { res, text, json, url: asked };
  };
  const got = (res, text) => {
    const type = String(res.headers?.get?.('content-type') || '').split(';')[0].trim() || t('agentNoContentType');
    const body = String(text ?? '').trim();
    if (body.startsWith('<')) return t('providerGotHtml', type);
    if (!body) return t('providerGotEmpty', type);
    return `${type}: “${body.replaceAll('\n', ' ').slice(0, 60)}${body.length > 60 ? '…' : ''}”`;
  };
  const notApi = (r, expected) => done(false, t('providerPingNotApi', shownUrl(r.url), String(r.res.status), got(r.res, r.text), expected), r.res.status);
  const failed = (r) => {
    if (r.res.status === 404) return done(false, t('providerPingNothing', shownUrl(r.url)), 404);
    return done(false, `${agentErrorOf(r.res.status, r.text, r.res.statusText).message} (${shownUrl(r.url)})`, r.res.status);
  };
  try {
    if (provider.kind === 'runs') {
      const h = await get('/health');
      if (!h.res.ok) return failed(h);
      if (!isObject(h.json) || typeof h.json.status !== 'string') return notApi(h, t('runsPingExpected'));
      const m = await get('/v1/models');
      if (!m.res.ok) return failed(m);
      if (!Array.isArray(m.json?.data)) return notApi(m, t('runsPingModelsExpected'));
      const name = typeof h.json.platform === 'string' ? h.json.platform : 'Hermes Agent'; // i18n-ok: a product name
      return done(true, t('runsPingOk', name, String(m.json.data.length)), m.res.status);
    }
    let h = await get('/global/health');
    if (h.res.status === 404) {
      h = await get('/config');
      if (!h.res.ok) return failed(h);
      if (!isObject(h.json)) return notApi(h, t('agentPingExpected'));
      return done(true, t('agentPingOkBare'), h.res.status);
    }
    if (!h.res.ok) return failed(h);
    if (!isObject(h.json) || (h.json.healthy !== true && typeof h.json.version !== 'string')) return notApi(h, t('agentPingExpected'));
    const version = typeof h.json.version === 'string' ? h.json.version : '';
    return done(true, version ? t('agentPingOk', version) : t('agentPingOkBare'), h.res.status);
  } catch (e) {
    if (ctrl.signal.aborted) return done(false, t('providerNoAnswer', shownUrl(asked), String(Math.round(timeoutMs / 1000))));
    if (e instanceof LlmError && e.kind === 'redirect') return done(false, e.message, e.status);
    return done(false, t('agentUnreachable', shownUrl(asked), describeThrown(e)));
  } finally {
    clearTimeout(timer);
  }
}
