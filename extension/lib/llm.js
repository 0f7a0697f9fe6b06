// Provider streaming clients over fetch + ReadableStream: OpenAI chat completions, OpenAI Responses and
// Anthropic Messages. No dependencies but lib/i18n.js (the words of its errors); runs in the MV3 service
// worker, extension pages and Node.
// The agent kinds `runs` (Hermes Agent's /v1/runs) and `agent` (opencode's server) are lib/agents.js's:
// streamReply, listModels and ping hand them over.
//
// The request body comes ready-made from the host (`request.build` result `.body`, PROTOCOL.md); this module
// adds `model` (the provider's, when set) and `stream: true`, and for Anthropic `max_tokens: 4096` when absent.
//
// Endpoints (trailing slashes of baseUrl ignored):
//   chat       POST {baseUrl}/chat/completions   baseUrl like https://api.openai.com/v1, http://localhost:11434/v1
//   responses  POST {baseUrl}/responses
//   anthropic  POST {baseUrl}/messages when baseUrl already ends with /v1, else POST {baseUrl}/v1/messages
//              (https://api.anthropic.com and https://api.anthropic.com/v1 both work)
// Defaults when baseUrl is empty: https://api.openai.com/v1 (chat, responses), https://api.anthropic.com.
// Headers: chat/responses send `Authorization: Bearer <key>` only when a key is set; anthropic sends
// `x-api-key` (when set), `anthropic-version: 2023-06-01` and `anthropic-dangerous-direct-browser-access: true`.
//
// Results and errors:
//   streamReply → {text, finishReason: 'stop'|'length'|'other', usage?: {inputTokens, outputTokens},
//                  truncated, reasoning?}
//     `truncated` is true when the stream ended cleanly (EOF) before the provider's terminal event
//     ([DONE] or a finish_reason / response.completed|incomplete / message_stop|stop_reason); the text is what
//     arrived and finishReason is 'other'. `reasoning` collects thinking/reasoning deltas when a provider sends
//     them (never part of `text`).
//   LlmError {kind, status?, message, partial, providerType?, retryAfter?, location?}
//     http      non-2xx response; message = the provider's error message from its JSON body when present
//     redirect  the provider answered with a redirect, which is never followed (see below); `location`
//               is where it pointed when that is known
//     network   fetch failed or the connection broke mid-stream
//     aborted   the caller's signal fired
//     idle      no bytes for `idleMs` (default 60 s), measured from the request start and between chunks
//     protocol  not an event stream, malformed stream data, or an error event inside the stream
//               (Anthropic `error`, Responses `error` / `response.failed`, chat `{error}` chunks); providerType
//               carries the provider's error type/code when given
//   `partial` is the text streamed before the failure ('' if none), for abort salvage (storage-model §9).
// A 200 answer with a JSON content type (a server that ignored `stream: true`) is read as a whole reply.
//
// Redirects (issue 18): every provider request is made with `redirect: 'manual'`, so the API key
// only ever goes to the address in the provider card. A followed redirect would carry `x-api-key`
// (and, to the same origin, `Authorization`) to wherever the server points. A redirect is an error
// instead, naming its target when the runtime shows the Location header (Node does); a browser
// hides it (an `opaqueredirect` response, status 0, no headers), and nothing else is sent to find
// out: no request ever goes to an address the person did not configure.

import { AGENT_KINDS, listAgentModels, pingAgent, streamAgent, streamRuns } from './agents.js';
import { t, formatNumber } from './i18n.js';

const KINDS = new Set(['chat', 'responses', 'anthropic', ...AGENT_KINDS]);
const DEFAULT_BASE = { chat: 'https://api.openai.com/v1', responses: 'https://api.openai.com/v1', anthropic: 'https://api.anthropic.com' };
const ANTHROPIC_VERSION = '2023-06-01';
const ERROR_BODY_CAP = 64 * 1024;

/** An LLM call failure. */
export class LlmError extends Error {
  /**
   * @param {'http'|'redirect'|'network'|'aborted'|'protocol'|'idle'} kind
   * @param {string} message
   * @param {{status?: number, partial?: string, providerType?: string, retryAfter?: number, location?: string, cause?: unknown}} [extra]
   */
  constructor(kind, message, extra = {}) {
    super(message);
    this.name = 'LlmError';
    this.kind = kind;
    this.status = extra.status;
    this.partial = extra.partial ?? '';
    if (extra.providerType !== undefined) this.providerType = extra.providerType;
    if (extra.retryAfter !== undefined) this.retryAfter = extra.retryAfter;
    if (extra.location !== undefined) this.location = extra.location;
    if (extra.cause !== undefined) this.cause = extra.cause;
  }
}

const defaultFetch = (...args) => globalThis.fetch(...args);

/** Part of every provider request's init: a redirect is answered, never followed (see the top). */
export const NO_REDIRECT = Object.freeze({ redirect: 'manual' });
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/** True for a redirect answer of a `redirect: 'manual'` request (opaque in browsers, 3xx in Node). */
export function isRedirect(res) {
  return res?.type === 'opaqueredirect' || REDIRECT_STATUSES.has(res?.status);
}

function originOf(url) {
  try {
    return new URL(url).origin;
  } catch {
    return String(url);
  }
}

/** Where a redirect answer points: its Location resolved against `url`, or null when hidden. */
export function redirectTarget(res, url) {
  const loc = res?.headers?.get?.('location');
  if (!loc) return null;
  try {
    return new URL(loc, url).href;
  } catch {
    return loc;
  }
}

/** The message of a redirect error: names the target when known. */
export function redirectMessage(url, target) {
  const from = originOf(url);
  const not = t('llmRedirectNotFollowed');
  if (!target) return t('llmRedirectHidden', from, not);
  return t('llmRedirectTo', from, target, not);
}

export function redirectError(res, url) {
  res?.body?.cancel?.().catch(() => {}); // free the connection (Node); an opaque answer has no body
  const location = redirectTarget(res, url);
  const extra = { location: location ?? undefined };
  if (res?.status) extra.status = res.status;
  return new LlmError('redirect', redirectMessage(url, location), extra);
}
const now = () => (globalThis.performance?.now ? globalThis.performance.now() : Date.now());

function trimSlashes(s) {
  let end = s.length;
  while (end > 0 && s[end - 1] === '/') end--;
  return s.slice(0, end);
}

function baseOf(provider) {
  const raw = String(provider?.baseUrl ?? '').trim();
  return trimSlashes(raw || DEFAULT_BASE[provider.kind]);
}

/**
 * The URL a provider kind posts to (see the rules at the top of this file).
 * @param {{kind: 'chat'|'responses'|'anthropic', baseUrl?: string}} provider
 * @param {string} [path] override the final path (e.g. '/models')
 * @returns {string}
 */
function endpointFor(provider, path) {
  const base = baseOf(provider);
  if (provider.kind === 'anthropic') {
    const root = base.toLowerCase().endsWith('/v1') ? base : base + '/v1';
    return root + (path ?? '/messages');
  }
  if (path) return base + path;
  return base + (provider.kind === 'responses' ? '/responses' : '/chat/completions');
}

/**
 * Request headers for a provider.
 * @param {{kind: string, apiKey?: string}} provider
 * @param {boolean} [streaming]
 * @returns {Record<string, string>}
 */
export function headersFor(provider, streaming = true) {
  const h = { 'content-type': 'application/json', accept: streaming ? 'text/event-stream' : 'application/json' };
  const key = typeof provider.apiKey === 'string' ? provider.apiKey.trim() : '';
  if (provider.kind === 'anthropic') {
    if (key) h['x-api-key'] = key;
    h['anthropic-version'] = ANTHROPIC_VERSION;
    h['anthropic-dangerous-direct-browser-access'] = 'true';
  } else if (key) {
    h.authorization = `Bearer ${key}`; // i18n-ok: HTTP authorization scheme
  }
  return h;
}

/**
 * The streaming request: `{url, headers, body}` (body as an object).
 * @param {{kind: 'chat'|'responses'|'anthropic', baseUrl?: string, apiKey?: string, model?: string}} provider
 * @param {object} body the host-built request body
 * @returns {{url: string, headers: Record<string, string>, body: object}}
 */
function buildStreamRequest(provider, body) {
  const b = { ...(body && typeof body === 'object' ? body : {}) };
  if (provider.model) b.model = provider.model;
  b.stream = true;
  if (provider.kind === 'anthropic' && (b.max_tokens === undefined || b.max_tokens === null)) b.max_tokens = 4096;
  return { url: endpointFor(provider), headers: headersFor(provider, true), body: b };
}

// ------------------------------------------------------------------------------------------------ SSE

/**
 * An incremental Server-Sent Events parser (WHATWG rules): LF, CR and CRLF line ends (a CRLF split across
 * chunks counts once), `:` comment lines, multiple `data:` lines joined with `\n`, one optional space after
 * the colon. At `end()` a last event without its blank line is still delivered.
 * @param {(evt: {event: string, data: string, id?: string}) => void} onEvent
 * @returns {{push: (text: string) => void, end: () => void}}
 */
export function createSseParser(onEvent) {
  let pending = [];
  let lastWasCR = false;
  let data = null;
  let event = '';
  let id;
  const line = (l) => {
    if (l === '') {
      if (data !== null) {
        const evt = { event: event || 'message', data: data.join('\n') };
        if (id !== undefined) evt.id = id;
        data = null;
        event = '';
        onEvent(evt);
      } else event = '';
      return;
    }
    if (l.charCodeAt(0) === 58) return; // ':' comment
    const c = l.indexOf(':');
    const field = c === -1 ? l : l.slice(0, c);
    let value = c === -1 ? '' : l.slice(c + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === 'data') (data ??= []).push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) id = value;
  };
  return {
    push(chunk) {
      if (!chunk) return;
      let start = 0;
      let i = 0;
      if (lastWasCR && chunk.charCodeAt(0) === 10) start = i = 1;
      lastWasCR = false;
      for (; i < chunk.length; i++) {
        const ch = chunk.charCodeAt(i);
        if (ch !== 10 && ch !== 13) continue;
        pending.push(chunk.slice(start, i));
        const l = pending.length === 1 ? pending[0] : pending.join('');
        pending = [];
        if (ch === 13) {
          if (i + 1 < chunk.length) {
            if (chunk.charCodeAt(i + 1) === 10) i++;
          } else lastWasCR = true;
        }
        start = i + 1;
        line(l);
      }
      if (start < chunk.length) pending.push(chunk.slice(start));
    },
    end() {
      if (pending.length) {
        const l = pending.join('');
        pending = [];
        line(l);
      }
      line('');
    },
  };
}

// ------------------------------------------------------------------------------------------------ errors

export function parseRetryAfter(v) {
  if (!v) return undefined;
  const n = Number(v);
  if (Number.isFinite(n) && n >= 0) return n;
  const t = Date.parse(v);
  return Number.isFinite(t) ? Math.max(0, Math.round((t - Date.now()) / 1000)) : undefined;
}

/**
 * The provider's error message from an error response body (OpenAI `{error: {message, type, code}}`,
 * Anthropic `{type: 'error', error: {type, message}}`, `{error: "…"}`, `{message}`, `{detail}`), else a short
 * form of the body, else `HTTP <status>`.
 * @param {number} status
 * @param {string} text response body
 * @param {string} [statusText]
 * @returns {{message: string, providerType?: string}}
 */
export function extractError(status, text, statusText = '') {
  let message = null;
  let providerType;
  const t = String(text ?? '').trim();
  if (t) {
    try {
      const j = JSON.parse(t);
      const e = Array.isArray(j) ? j[0]?.error : j?.error;
      if (e && typeof e === 'object') {
        if (typeof e.message === 'string' && e.message) message = e.message;
        const ty = e.type ?? e.code ?? e.status;
        if (typeof ty === 'string' || typeof ty === 'number') providerType = String(ty);
      } else if (typeof e === 'string' && e) message = e;
      if (!message && typeof j?.message === 'string' && j.message) message = j.message;
      if (!message && typeof j?.detail === 'string' && j.detail) message = j.detail;
      if (!message && Array.isArray(j?.detail)) {
        message = j.detail.map((d) => (typeof d?.msg === 'string' ? d.msg : JSON.stringify(d))).join('; ');
      }
    } catch {
      // not JSON
    }
    if (!message && !t.startsWith('<')) message = t.length > 500 ? t.slice(0, 500) + '…' : t;
  }
  if (!message) message = `HTTP ${status}${statusText ? ' ' + statusText : ''}`;
  return providerType === undefined ? { message } : { message, providerType };
}

export async function readCapped(res, cap) {
  if (!res.body || typeof res.body.getReader !== 'function') {
    const t = await res.text();
    return t.slice(0, cap);
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let out = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      out += dec.decode(value, { stream: true });
      if (out.length >= cap) break;
    }
    out += dec.decode();
  } finally {
    reader.cancel().catch(() => {});
  }
  return out.slice(0, cap);
}

/** What a thrown network error says, with its cause when that adds something. */
export function describeThrown(e) {
  if (!e) return t('llmNetworkError');
  const base = e.message || String(e);
  const cause = e.cause && (e.cause.message || e.cause.code);
  return cause && cause !== base ? `${base} (${cause})` : base;
}

/** `url` without credentials, query or fragment (what an error message may show). */
export function shownUrl(url) {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return String(url ?? '');
  }
}

/**
 * Loopback hosts, where plain http never leaves the machine: `localhost` (and `*.localhost`),
 * 127.0.0.0/8 and ::1 (also as ::ffff:127.x.y.z). `hostname` as `URL` gives it (IPv6 in brackets).
 */
export function isLoopbackHost(hostname) {
  let h = String(hostname ?? '').toLowerCase();
  if (h.endsWith('.')) h = h.slice(0, -1);
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (h === '[::1]') return true;
  if (h.startsWith('[::ffff:7f')) return true; // ::ffff:127.x.y.z, as the URL parser writes it
  const parts = h.split('.');
  return parts.length === 4 && parts[0] === '127' && parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255);
}

/** Whether `url` is on this machine (isLoopbackHost) or the local network (where Ollama and LM Studio run). */
export function isLocalAddress(url) {
  let host = '';
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return false;
  }
  if (isLoopbackHost(host) || host.endsWith('.local')) return true;
  const o = host.split('.').map(Number);
  if (o.length !== 4 || o.some((n) => !Number.isInteger(n) || n < 0 || n > 255)) return false;
  return o[0] === 10 || (o[0] === 192 && o[1] === 168) || (o[0] === 172 && o[1] >= 16 && o[1] <= 31);
}

/** Ollama's note on browser origins (a local server that refuses the extension answers 403 or not at all). */
export function ollamaOriginsNote() {
  return t('llmOllamaOriginsNote');
}

/**
 * A network failure (nothing came back) explained: the address, what the browser said, the likely causes.
 * @param {string} url
 * @param {unknown} e what fetch threw
 */
export function networkErrorMessage(url, e) {
  // a local server is not behind a proxy; a remote one may be, and Ollama's origins note is for local ones
  if (isLocalAddress(url)) return t('llmUnreachableLocal', shownUrl(url), describeThrown(e), ollamaOriginsNote());
  return t('llmUnreachableRemote', shownUrl(url), describeThrown(e));
}

// ------------------------------------------------------------------------------------------------ events

function normalizeFinish(kind, reason) {
  if (reason === null || reason === undefined) return null;
  if (kind === 'chat') return reason === 'stop' ? 'stop' : reason === 'length' ? 'length' : 'other';
  if (kind === 'anthropic') {
    return reason === 'end_turn' || reason === 'stop_sequence' ? 'stop' : reason === 'max_tokens' ? 'length' : 'other';
  }
  return reason;
}

function responsesOutputText(response) {
  let out = '';
  for (const item of response?.output ?? []) {
    if (item?.type !== 'message') continue;
    for (const part of item.content ?? []) if (part?.type === 'output_text' && typeof part.text === 'string') out += part.text;
  }
  return out;
}

/**
 * Read a whole (non-streaming) reply: `{text, finishReason, usage?}`.
 * @param {'chat'|'responses'|'anthropic'} kind
 * @param {any} j parsed JSON body
 * @returns {{text: string, finishReason: 'stop'|'length'|'other', usage?: {inputTokens?: number, outputTokens?: number}}}
 */
export function parseWholeReply(kind, j) {
  if (kind === 'chat') {
    const ch = j?.choices?.[0];
    const c = ch?.message?.content;
    const text = typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => p?.text ?? '').join('') : '';
    const u = j?.usage;
    return {
      text,
      finishReason: normalizeFinish('chat', ch?.finish_reason) ?? 'stop',
      usage: u ? { inputTokens: u.prompt_tokens, outputTokens: u.completion_tokens } : undefined,
    };
  }
  if (kind === 'responses') {
    const text = typeof j?.output_text === 'string' ? j.output_text : responsesOutputText(j);
    const reason = j?.status === 'incomplete' ? (j?.incomplete_details?.reason === 'max_output_tokens' ? 'length' : 'other') : 'stop';
    const u = j?.usage;
    return { text, finishReason: reason, usage: u ? { inputTokens: u.input_tokens, outputTokens: u.output_tokens } : undefined };
  }
  const text = (j?.content ?? []).filter((b) => b?.type === 'text').map((b) => b.text ?? '').join('');
  const u = j?.usage;
  return {
    text,
    finishReason: normalizeFinish('anthropic', j?.stop_reason) ?? 'stop',
    usage: u ? { inputTokens: u.input_tokens, outputTokens: u.output_tokens } : undefined,
  };
}

function makeHandler(kind, st, emit) {
  const parse = (data) => {
    try {
      return JSON.parse(data);
    } catch {
      throw new LlmError('protocol', t('llmMalformedStream', data.slice(0, 120)));
    }
  };
  return (evt) => {
    if (st.done) return;
    const data = evt.data;
    if (kind === 'chat') {
      if (data.trim() === '[DONE]') {
        emit.event({ type: '[DONE]', data });
        st.done = true;
        return;
      }
      if (data.trim() === '') return;
      const j = parse(data);
      emit.event({ type: evt.event === 'message' ? 'chunk' : evt.event, data: j });
      if (j?.error) {
        const e = extractError(0, JSON.stringify(j));
        throw new LlmError('protocol', e.message, { providerType: e.providerType });
      }
      const ch = Array.isArray(j?.choices) ? j.choices.find((c) => (c?.index ?? 0) === 0) : undefined;
      const d = ch?.delta;
      if (d) {
        if (typeof d.content === 'string' && d.content) emit.text(d.content);
        const r = typeof d.reasoning_content === 'string' ? d.reasoning_content : typeof d.reasoning === 'string' ? d.reasoning : '';
        if (r) emit.reasoning(r);
      }
      if (ch?.finish_reason) st.finishReason = normalizeFinish('chat', ch.finish_reason);
      if (j?.usage) st.usage = { inputTokens: j.usage.prompt_tokens, outputTokens: j.usage.completion_tokens };
      return;
    }
    if (data.trim() === '') return;
    const j = parse(data);
    const type = typeof j?.type === 'string' ? j.type : evt.event;
    emit.event({ type, data: j });
    if (kind === 'responses') {
      switch (type) {
        case 'response.output_text.delta':
        case 'response.refusal.delta':
          if (typeof j.delta === 'string') emit.text(j.delta);
          break;
        case 'response.reasoning_summary_text.delta':
        case 'response.reasoning_text.delta':
          if (typeof j.delta === 'string') emit.reasoning(j.delta);
          break;
        case 'response.completed':
          if (!st.text) {
            const t = responsesOutputText(j.response);
            if (t) emit.text(t);
          }
          st.finishReason = 'stop';
          if (j.response?.usage) st.usage = { inputTokens: j.response.usage.input_tokens, outputTokens: j.response.usage.output_tokens };
          st.done = true;
          break;
        case 'response.incomplete':
          st.finishReason = j.response?.incomplete_details?.reason === 'max_output_tokens' ? 'length' : 'other';
          if (j.response?.usage) st.usage = { inputTokens: j.response.usage.input_tokens, outputTokens: j.response.usage.output_tokens };
          st.done = true;
          break;
        case 'response.failed': {
          const err = j.response?.error;
          throw new LlmError('protocol', err?.message || t('llmProviderResponseFailed'), {
            providerType: err?.code ?? err?.type,
          });
        }
        case 'error':
          throw new LlmError('protocol', j.message || j.error?.message || t('llmProviderError'), {
            providerType: j.code ?? j.error?.type ?? j.error?.code ?? undefined,
          });
        default:
          break;
      }
      return;
    }
    // anthropic
    switch (type) {
      case 'message_start':
        if (j.message?.usage) st.usage = { inputTokens: j.message.usage.input_tokens, outputTokens: j.message.usage.output_tokens };
        break;
      case 'content_block_delta': {
        const d = j.delta;
        if (d?.type === 'text_delta' && typeof d.text === 'string') emit.text(d.text);
        else if (d?.type === 'thinking_delta' && typeof d.thinking === 'string') emit.reasoning(d.thinking);
        break;
      }
      case 'message_delta':
        if (j.delta?.stop_reason) st.finishReason = normalizeFinish('anthropic', j.delta.stop_reason);
        if (j.usage?.output_tokens !== undefined) {
          st.usage = { inputTokens: st.usage?.inputTokens, outputTokens: j.usage.output_tokens };
          if (j.usage.input_tokens !== undefined) st.usage.inputTokens = j.usage.input_tokens;
        }
        break;
      case 'message_stop':
        st.done = true;
        break;
      case 'error':
        throw new LlmError('protocol', j.error?.message || t('llmProviderError'), {
          providerType: j.error?.type,
        });
      default:
        break; // ping, content_block_start/stop, unknown future events
    }
  };
}

// ------------------------------------------------------------------------------------------------ streaming

/**
 * One streamed call's plumbing, shared by `streamReply` and lib/agents.js: an AbortController tied
 * to the caller's `signal`, an idle timer (`arm()` after every byte; firing aborts with why 'idle'),
 * `race(p)` that rejects once the call is aborted, `fetch` with the call's signal and no redirects,
 * `map(e, url)` turning a thrown value into the LlmError the call reports, and `close()` (timer,
 * listener, open readers, connection).
 * @param {{signal?: AbortSignal, idleMs: number, fetchImpl: typeof fetch,
 *   idleMessage?: (secs: string) => string, unreachable?: (url: string, e: unknown) => string}} o
 */
export function callContext({ signal, idleMs, fetchImpl, idleMessage = (secs) => t('llmIdle', secs), unreachable = networkErrorMessage }) {
  const ctrl = new AbortController();
  let why = null;
  const onAbort = () => {
    why ??= 'aborted';
    ctrl.abort();
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  let timer = null;
  const arm = () => {
    if (timer !== null) clearTimeout(timer);
    if (idleMs > 0 && Number.isFinite(idleMs)) {
      timer = setTimeout(() => {
        why ??= 'idle';
        ctrl.abort();
      }, idleMs);
    }
  };
  const aborted = new Promise((_, reject) => ctrl.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
  aborted.catch(() => {});
  const readers = new Set();
  return {
    get why() {
      return why;
    },
    arm,
    race: (p) => Promise.race([p, aborted]),
    readers,
    fetch: (url, init) => fetchImpl(url, { ...init, signal: ctrl.signal, ...NO_REDIRECT }),
    map(e, url) {
      if (why === 'idle') return new LlmError('idle', idleMessage(formatNumber(Math.round(idleMs / 100) / 10)), { cause: e });
      if (why === 'aborted') return new LlmError('aborted', t('llmAborted'), { cause: e });
      if (e instanceof LlmError) return e;
      return new LlmError('network', unreachable(url, e), { cause: e });
    },
    close() {
      if (timer !== null) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      for (const r of readers) r.cancel().catch(() => {});
      ctrl.abort(); // release the connection (no-op once the body is read)
    },
  };
}

/**
 * Stream one reply.
 * @param {object} args
 * @param {{kind: 'chat'|'responses'|'anthropic', baseUrl?: string, apiKey?: string, model?: string}} args.provider
 * @param {object} [args.body] the host-built request body (request.build `.body`)
 * @param {string} [args.bodyText] instead of `body`: its JSON text, sent as it is. It must already
 *   hold what buildStreamRequest sets (`model`, `stream: true`, Anthropic's `max_tokens`), as a
 *   body built with request.build's `bodyFields` from background/provider.js's bodyFieldsFor does.
 * @param {string} [args.agentSessionId] kind `agent`: the opencode session the turn goes to (lib/agents.js)
 * @param {AbortSignal} [args.signal] abort → LlmError kind 'aborted' with `partial`
 * @param {(delta: string, text: string) => void} [args.onDelta] each text delta and the text so far
 * @param {(evt: {type: string, data?: any, delta?: string}) => void} [args.onEvent] every parsed stream event,
 *   plus `{type: 'reasoning', delta}` for reasoning/thinking deltas
 * @param {typeof fetch} [args.fetchImpl]
 * @param {number} [args.idleMs=60000] abort with kind 'idle' after this long without bytes (0 = never)
 * @returns {Promise<{text: string, finishReason: 'stop'|'length'|'other', usage?: {inputTokens?: number,
 *   outputTokens?: number}, truncated: boolean, reasoning?: string}>}
 */
export async function streamReply(args) {
  const { provider, body, bodyText, signal, onDelta, onEvent, fetchImpl = defaultFetch, idleMs = 60_000 } = args;
  if (!provider || !KINDS.has(provider.kind)) {
    throw new LlmError('protocol', t('llmUnknownKind', provider?.kind));
  }
  if (provider.kind === 'runs') return streamRuns({ ...args, fetchImpl, idleMs });
  if (provider.kind === 'agent') return streamAgent({ ...args, fetchImpl, idleMs });
  const kind = provider.kind;
  const req = buildStreamRequest(provider, body);
  const st = { text: '', reasoning: '', finishReason: null, usage: undefined, done: false };
  const safeCall = (fn, ...a) => {
    if (typeof fn !== 'function') return;
    try {
      fn(...a);
    } catch (e) {
      // A failing listener (e.g. a closed port) must not kill the stream.
      console.error('llm listener failed', e);
    }
  };
  const emit = {
    text(d) {
      st.text += d;
      safeCall(onDelta, d, st.text);
    },
    reasoning(d) {
      st.reasoning += d;
      safeCall(onEvent, { type: 'reasoning', delta: d });
    },
    event(e) {
      safeCall(onEvent, e);
    },
  };
  const withPartial = (err) => {
    err.partial = st.text;
    return err;
  };
  if (signal?.aborted) throw withPartial(new LlmError('aborted', t('llmAborted')));

  const cx = callContext({ signal, idleMs, fetchImpl });
  const { race, arm } = cx;
  const mapThrown = (e) => withPartial(cx.map(e, req.url));

  try {
    arm();
    let res;
    try {
      res = await race(
        cx.fetch(req.url, {
          method: 'POST',
          headers: req.headers,
          body: typeof bodyText === 'string' ? bodyText : JSON.stringify(req.body),
        }),
      );
    } catch (e) {
      throw mapThrown(e);
    }
    arm();
    if (isRedirect(res)) throw withPartial(redirectError(res, req.url));
    if (!res.ok) {
      let text = '';
      try {
        text = await race(readCapped(res, ERROR_BODY_CAP));
      } catch (e) {
        if (cx.why) throw mapThrown(e);
      }
      const { message, providerType } = extractError(res.status, text, res.statusText);
      throw withPartial(
        new LlmError('http', message, {
          status: res.status,
          providerType,
          retryAfter: parseRetryAfter(res.headers?.get?.('retry-after')),
        }),
      );
    }
    const ctype = String(res.headers?.get?.('content-type') ?? '').toLowerCase();
    if (ctype.includes('application/json')) {
      let j;
      try {
        j = JSON.parse(await race(res.text()));
      } catch (e) {
        if (cx.why) throw mapThrown(e);
        throw withPartial(new LlmError('protocol', t('llmInvalidJson')));
      }
      if (j?.error) {
        const { message, providerType } = extractError(res.status, JSON.stringify(j));
        throw withPartial(new LlmError('protocol', message, { providerType }));
      }
      const whole = parseWholeReply(kind, j);
      if (whole.text) emit.text(whole.text);
      return { text: st.text, finishReason: whole.finishReason, usage: whole.usage, truncated: false };
    }
    if (ctype.includes('text/html')) {
      throw withPartial(new LlmError('protocol', t('llmNotEventStream', ctype.split(';')[0])));
    }
    const parser = createSseParser(makeHandler(kind, st, emit));
    const decoder = new TextDecoder('utf-8');
    if (!res.body || typeof res.body.getReader !== 'function') {
      let t;
      try {
        t = await race(res.text());
      } catch (e) {
        throw mapThrown(e);
      }
      parser.push(t);
    } else {
      const reader = res.body.getReader();
      cx.readers.add(reader);
      while (!st.done) {
        let r;
        try {
          r = await race(reader.read());
        } catch (e) {
          throw mapThrown(e);
        }
        if (r.done) break;
        arm();
        parser.push(decoder.decode(r.value, { stream: true }));
      }
    }
    if (!st.done) {
      parser.push(decoder.decode());
      parser.end();
    }
    const complete = st.done || st.finishReason !== null;
    const out = {
      text: st.text,
      finishReason: complete ? (st.finishReason ?? 'stop') : 'other',
      truncated: !complete,
    };
    if (st.usage) out.usage = st.usage;
    if (st.reasoning) out.reasoning = st.reasoning;
    return out;
  } catch (e) {
    throw e instanceof LlmError ? withPartial(e) : mapThrown(e);
  } finally {
    cx.close();
  }
}

// ------------------------------------------------------------------------------------------------ models

/** The model ids of a `/models` answer (OpenAI's and Anthropic's `data: [{id}]`, Ollama's `models: [{name}]`), or null. */
function modelIds(text) {
  let j;
  try {
    j = JSON.parse(text);
  } catch {
    return null;
  }
  if (Array.isArray(j?.data)) return j.data.map((m) => m?.id).filter((x) => typeof x === 'string');
  if (Array.isArray(j?.models)) return j.models.map((m) => m?.id ?? m?.name).filter((x) => typeof x === 'string');
  return null;
}

/**
 * The models a provider lists (`GET …/models`; Anthropic's `GET /v1/models`), for the panel's
 * switcher. Never throws: `{ok: true, models}` sorted, or `{ok: false, detail}` saying why.
 * @param {{kind: string, baseUrl?: string, apiKey?: string}} provider
 * @param {typeof fetch} [fetchImpl]
 * @param {{timeoutMs?: number}} [opts]
 */
export async function listModels(provider, fetchImpl = defaultFetch, { timeoutMs = 15_000 } = {}) {
  if (!provider || !KINDS.has(provider.kind)) return { ok: false, detail: t('llmUnknownKind', provider?.kind) };
  if (AGENT_KINDS.includes(provider.kind)) return listAgentModels(provider, fetchImpl, { timeoutMs });
  const url = endpointFor(provider, '/models');
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  try {
    const res = await fetchImpl(url, { method: 'GET', headers: headersFor(provider, false), signal: ctrl.signal, ...NO_REDIRECT });
    if (isRedirect(res)) return { ok: false, detail: redirectError(res, url).message };
    const text = await res.text();
    if (!res.ok) return { ok: false, detail: `${extractError(res.status, text, res.statusText).message} (${shownUrl(url)})` };
    const ids = modelIds(text);
    if (!ids) return { ok: false, detail: t('llmNoModelList', shownUrl(url)) };
    return { ok: true, models: [...new Set(ids)].sort((a, b) => a.localeCompare(b)) };
  } catch (e) {
    if (ctrl.signal.aborted) return { ok: false, detail: t('llmNoAnswerWithin', shownUrl(url), formatNumber(Math.round(timeoutMs / 1000))) };
    return { ok: false, detail: networkErrorMessage(url, e) };
  } finally {
    clearTimeout(timer);
  }
}

// ------------------------------------------------------------------------------------------------ ping

/** A Ping's result maker, timed from now: `done(ok, detail, status?)` → {ok, ms, detail, status?}. */
export function pingClock() {
  const t0 = now();
  return (ok, detail, status) => {
    const r = { ok, ms: Math.round(now() - t0), detail };
    if (status !== undefined) r.status = status;
    return r;
  };
}

/**
 * A quick reachability/credentials check for the options page: chat → `GET {baseUrl}/models` (falling back to
 * a 1-token completion when the server has no /models); responses → a tiny non-streaming response
 * (max_output_tokens 16); anthropic → a tiny non-streaming message (max_tokens 1). Never throws. A
 * redirect is not followed: the result is not ok and its detail names the target.
 * @param {{kind: 'chat'|'responses'|'anthropic', baseUrl?: string, apiKey?: string, model?: string}} provider
 * @param {typeof fetch} [fetchImpl]
 * @param {{timeoutMs?: number}} [opts]
 * @returns {Promise<{ok: boolean, ms: number, detail: string, status?: number}>}
 */
export async function ping(provider, fetchImpl = defaultFetch, { timeoutMs = 20_000 } = {}) {
  const done = pingClock();
  if (!provider || !KINDS.has(provider.kind)) return done(false, t('llmUnknownKind', provider?.kind));
  if (AGENT_KINDS.includes(provider.kind)) return pingAgent(provider, fetchImpl, { timeoutMs });
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  let asked = '';
  const call = async (url, init) => {
    asked = url;
    const res = await fetchImpl(url, { ...init, signal: ctrl.signal, ...NO_REDIRECT });
    if (isRedirect(res)) throw redirectError(res, url);
    const text = await res.text();
    return { res, text, url };
  };
  const post = (body) =>
    call(endpointFor(provider), { method: 'POST', headers: headersFor(provider, false), body: JSON.stringify(body) });
  // OpenAI-compatible servers usually answer under …/v1: the message says so, except for Anthropic
  const v1Hint = provider.kind !== 'anthropic';
  // what came back, in a few words: an HTML page, an empty body, or the first characters
  const got = (res, text) => {
    const type = String(res.headers?.get?.('content-type') || '').split(';')[0].trim() || t('llmGotNoContentType');
    const body = String(text ?? '').trim();
    if (body.startsWith('<')) return t('llmGotHtmlPage', type);
    if (!body) return t('llmGotEmptyBody', type);
    return `${type}: “${body.replaceAll('\n', ' ').slice(0, 60)}${body.length > 60 ? '…' : ''}”`;
  };
  const notApi = ({ res, text, url }, expected) =>
    done(
      false,
      v1Hint
        ? t('llmPingNotApiV1', shownUrl(url), res.status, got(res, text), expected)
        : t('llmPingNotApi', shownUrl(url), res.status, got(res, text), expected),
      res.status,
    );
  const failed = ({ res, text, url }) => {
    if (res.status === 404) return done(false, v1Hint ? t('llmPing404V1', shownUrl(url)) : t('llmPing404', shownUrl(url)), 404);
    const local = res.status === 403 && isLocalAddress(url) ? ` ${ollamaOriginsNote()}` : '';
    return done(false, `${extractError(res.status, text, res.statusText).message} (${shownUrl(url)})${local}`, res.status);
  };
  const SHAPES = {
    chat: [(j) => Array.isArray(j?.choices), () => t('llmExpectChatCompletion')],
    responses: [(j) => j?.object === 'response' || Array.isArray(j?.output), () => t('llmExpectResponsesReply')],
    anthropic: [(j) => j?.type === 'message' || Array.isArray(j?.content), () => t('llmExpectAnthropicMessage')],
  };
  const replied = (r) => {
    const [fits, expected] = SHAPES[provider.kind];
    let j;
    try {
      j = JSON.parse(r.text);
    } catch {
      return notApi(r, expected());
    }
    if (!fits(j)) return notApi(r, expected());
    const w = parseWholeReply(provider.kind, j);
    const model = typeof j?.model === 'string' ? j.model : provider.model;
    const okText = model ? t('llmPingOkModel', model) : t('llmPingOk');
    return done(true, w.text ? t('llmPingOkSaid', okText, w.text.slice(0, 40)) : okText, r.res.status);
  };
  try {
    if (provider.kind === 'chat') {
      const listing = await call(endpointFor(provider, '/models'), { method: 'GET', headers: headersFor(provider, false) });
      const { res, text } = listing;
      if (res.ok) {
        const ids = modelIds(text);
        if (!ids) return notApi(listing, t('llmExpectModelList'));
        const listed = !provider.model || ids.includes(provider.model);
        const count = ids.length === 1 ? t('llmPingOkOneModel') : t('llmPingOkModels', formatNumber(ids.length));
        return done(true, listed ? count : t('llmPingModelNotListed', count, provider.model), res.status);
      }
      if (res.status !== 404 && res.status !== 405) return failed(listing);
      // no model list there: a one-token completion says whether this is a chat API
      const r = await post({ model: provider.model, messages: [{ role: 'user', content: 'ping' }], max_tokens: 1 });
      return r.res.ok ? replied(r) : failed(r);
    }
    const body =
      provider.kind === 'responses'
        ? { model: provider.model, input: 'ping', max_output_tokens: 16, store: false }
        : { model: provider.model, max_tokens: 1, messages: [{ role: 'user', content: 'ping' }] };
    const r = await post(body);
    return r.res.ok ? replied(r) : failed(r);
  } catch (e) {
    if (ctrl.signal.aborted) return done(false, t('llmNoAnswerWithin', shownUrl(asked), formatNumber(Math.round(timeoutMs / 1000))));
    if (e instanceof LlmError && e.kind === 'redirect') return done(false, e.message, e.status);
    return done(false, networkErrorMessage(asked, e));
  } finally {
    clearTimeout(timer);
  }
}
