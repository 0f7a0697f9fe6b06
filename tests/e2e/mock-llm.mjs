// A scripted mock LLM server (node:http, no dependencies) speaking the three streaming protocols the
// extension uses, faithfully enough to exercise real clients:
//   POST …/chat/completions   OpenAI chat completions (SSE `data: {chunk}` … `data: [DONE]`, or one JSON)
//   POST …/responses          OpenAI Responses (typed SSE events, or one JSON response object)
//   POST …/messages           Anthropic Messages (message_start … message_stop, ping, error; or one JSON)
//   GET  …/models             OpenAI model list (Anthropic's shape when an `anthropic-version` header is sent)
// Paths are matched by suffix, so `/v1/chat/completions` and `/chat/completions` both work.
// Every response carries `Access-Control-Allow-Origin: *`; OPTIONS preflights get 204.
//
// Usage from tests:
//   const mock = await startMockLlm({ script: (req) => ({ text: 'hello', chunkSize: 2 }) });
//   … fetch(`${mock.url}/v1/chat/completions`, …) …
//   mock.requests[0].body / .headers   // what the client sent
//   mock.setScript((req) => ({ status: 401 }));
//   await mock.close();
//
// A script is a function (req) → reply spec (or a Promise of one), or a plain reply spec object. `req` is
// {method, path, kind: 'chat'|'responses'|'anthropic'|'models'|null, headers, body, rawBody, stream, lastUserText}.
// Reply spec (all optional):
//   text          reply text (default: `Mock reply to: <first 40 chars of the last user text>`)
//   stamp         true → append ` [00:05]` to the default text
//   huge          n → a reply of n chars of filler text (e.g. 1.2 MiB), sent in big chunks
//   chunkSize     chars per text delta (default 8; 16384 for huge replies)
//   delayMs       pause between SSE events (default 0)
//   splitBytes    re-slice the byte stream into writes of this many bytes (splits UTF-8 chars and lines)
//   crlf          use CRLF line ends; comments: true → interleave `: keep-alive` comment lines
//   finish        'stop' (default) | 'length' → chat finish_reason "length", Responses `response.incomplete`
//                 (max_output_tokens), Anthropic stop_reason "max_tokens"; any other string is passed through
//   status        ≥ 400 → an error response shaped like the provider's (`error` {message, type, code} overrides;
//                 `retryAfter` seconds adds a Retry-After header). 429 defaults to a rate-limit error.
//   hangAfter     n → send n text deltas, then send nothing more but keep the connection open
//   disconnectAfter n → send n text deltas, then destroy the socket (mid-stream disconnect)
//   omitDone      end the HTTP response without the terminal event(s)
//   streamError   {after, message, type} → after `after` deltas, an in-stream error event
//   raw           a string/Buffer (or an array of them, written one by one with delayMs) sent verbatim as the
//                 body with `contentType` (default text/event-stream)
//   headers       extra response headers
//   usage         {input, output} token counts to report
//   redirect      a URL (or {location, status}) → answer with that redirect (status 307 by default) and
//                 a Location header, nothing else, on every path (the script also runs for paths with no
//                 route, where only `redirect` counts); clients must not follow it with the key (issue 18)
// A request without `stream: true` gets the provider's non-streaming JSON shape (same text/finish/status).
// Options of startMockLlm: {port = 0, host = '127.0.0.1', script, apiKey, models} — with `apiKey` set, a
// request lacking that key (Bearer or x-api-key) gets the provider's 401.
//
// Standalone: `node tests/e2e/mock-llm.mjs --port 8787 [--host 127.0.0.1]` prints its URL.

import http from 'node:http';
import { pathToFileURL } from 'node:url';

const FILLER = 'The quick brown fox jumps over the lazy dog [00:05]. ';

function kindOf(method, path) {
  const p = path.replace(/\/+$/, '');
  if (method === 'POST' && p.endsWith('/chat/completions')) return 'chat';
  if (method === 'POST' && p.endsWith('/responses')) return 'responses';
  if (method === 'POST' && p.endsWith('/messages')) return 'anthropic';
  if (method === 'GET' && p.endsWith('/models')) return 'models';
  return null;
}

function partsText(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p) => (typeof p === 'string' ? p : typeof p?.text === 'string' ? p.text : ''))
    .filter(Boolean)
    .join('\n');
}

function lastUserText(kind, body) {
  if (!body || typeof body !== 'object') return '';
  if (kind === 'responses') {
    if (typeof body.input === 'string') return body.input;
    const items = Array.isArray(body.input) ? body.input : [];
    for (let i = items.length - 1; i >= 0; i--) if (items[i]?.role === 'user') return partsText(items[i].content);
    return '';
  }
  const msgs = Array.isArray(body.messages) ? body.messages : [];
  for (let i = msgs.length - 1; i >= 0; i--) if (msgs[i]?.role === 'user') return partsText(msgs[i].content);
  return '';
}

function chunksOf(text, size) {
  const out = [];
  const cps = Array.from(text); // never split a surrogate pair inside one JSON delta
  for (let i = 0; i < cps.length; i += size) out.push(cps.slice(i, i + size).join(''));
  return out;
}

function errorBody(kind, status, err = {}) {
  const defaults =
    status === 401
      ? { message: kind === 'anthropic' ? 'invalid x-api-key' : 'Incorrect API key provided.', type: kind === 'anthropic' ? 'authentication_error' : 'invalid_request_error', code: 'invalid_api_key' }
      : status === 429
        ? { message: 'Rate limit reached for requests. Please try again in 1s.', type: kind === 'anthropic' ? 'rate_limit_error' : 'requests', code: 'rate_limit_exceeded' }
        : status === 404
          ? { message: 'The model does not exist.', type: kind === 'anthropic' ? 'not_found_error' : 'invalid_request_error', code: 'model_not_found' }
          : status === 529
            ? { message: 'Overloaded', type: 'overloaded_error', code: null }
            : { message: `Mock error ${status}`, type: kind === 'anthropic' ? 'api_error' : 'server_error', code: null };
  const e = { ...defaults, ...err };
  if (kind === 'anthropic') return { type: 'error', error: { type: e.type, message: e.message } };
  return { error: { message: e.message, type: e.type, param: null, code: e.code } };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Start the mock server.
 * @param {{port?: number, host?: string, script?: Function|object, apiKey?: string, models?: string[]}} [opts]
 * @returns {Promise<{url: string, port: number, requests: object[], close: () => Promise<void>,
 *   setScript: (fn: Function|object) => void}>}
 */
export async function startMockLlm({ port = 0, host = '127.0.0.1', script, apiKey, models = ['mock-model', 'mock-model-2'] } = {}) {
  let current = script ?? {};
  const requests = [];
  const sockets = new Set();
  let seq = 0;

  const server = http.createServer(async (req, res) => {
    const cors = {
      'access-control-allow-origin': '*',
      'access-control-allow-headers': req.headers['access-control-request-headers'] || '*',
      'access-control-allow-methods': 'GET, POST, OPTIONS',
      'access-control-expose-headers': '*',
      'access-control-max-age': '600',
    };
    if (req.method === 'OPTIONS') {
      res.writeHead(204, cors);
      res.end();
      return;
    }
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const rawBody = Buffer.concat(chunks).toString('utf8');
    let body = null;
    try {
      body = rawBody ? JSON.parse(rawBody) : null;
    } catch {
      body = null;
    }
    const path = new URL(req.url, 'http://x').pathname;
    const kind = kindOf(req.method, path);
    const record = {
      method: req.method,
      path,
      kind,
      headers: { ...req.headers },
      body,
      rawBody,
      stream: body?.stream === true,
      lastUserText: lastUserText(kind, body),
    };
    requests.push(record);

    const send = (status, obj, extra = {}) => {
      const data = JSON.stringify(obj);
      res.writeHead(status, { ...cors, 'content-type': 'application/json', ...extra });
      res.end(data);
    };
    const redirectOf = (spec) => {
      if (!spec?.redirect) return false;
      const r = typeof spec.redirect === 'string' ? { location: spec.redirect } : spec.redirect;
      res.writeHead(r.status ?? 307, { ...cors, ...(spec.headers ?? {}), location: r.location });
      res.end();
      return true;
    };
    if (!kind) {
      // a redirecting server moves every path (a GET of the POST routes too)
      let spec = null;
      try {
        spec = typeof current === 'function' ? await current(record) : current;
      } catch {
        spec = null;
      }
      if (redirectOf(spec)) return;
      send(404, { error: { message: `No route for ${req.method} ${path}`, type: 'invalid_request_error' } });
      return;
    }
    const apiKind = kind === 'models' ? (req.headers['anthropic-version'] ? 'anthropic' : 'chat') : kind;
    if (apiKey) {
      const got = req.headers['x-api-key'] || (req.headers.authorization || '').replace(/^Bearer\s+/i, '');
      if (got !== apiKey) {
        send(401, errorBody(apiKind, 401));
        return;
      }
    }
    let spec;
    try {
      spec = typeof current === 'function' ? await current(record) : current;
    } catch (e) {
      send(500, errorBody(apiKind, 500, { message: `mock script failed: ${e.message}` }));
      return;
    }
    spec = spec ?? {};
    if (redirectOf(spec)) return;
    const extraHeaders = { ...(spec.headers ?? {}) };
    if (spec.retryAfter !== undefined) extraHeaders['retry-after'] = String(spec.retryAfter);
    if (spec.status && spec.status >= 400) {
      if (spec.status === 429 && extraHeaders['retry-after'] === undefined) extraHeaders['retry-after'] = '1';
      send(spec.status, errorBody(apiKind, spec.status, spec.error), extraHeaders);
      return;
    }
    if (kind === 'models') {
      if (apiKind === 'anthropic') {
        send(200, {
          data: models.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })),
          has_more: false,
          first_id: models[0] ?? null,
          last_id: models[models.length - 1] ?? null,
        }, extraHeaders);
      } else {
        send(200, { object: 'list', data: models.map((id) => ({ id, object: 'model', created: 1700000000, owned_by: 'mock' })) }, extraHeaders);
      }
      return;
    }

    const id = ++seq;
    const model = typeof body?.model === 'string' ? body.model : 'mock-model';
    const text =
      typeof spec.text === 'string'
        ? spec.text
        : spec.huge
          ? FILLER.repeat(Math.ceil(spec.huge / FILLER.length)).slice(0, spec.huge)
          : `Mock reply to: ${record.lastUserText.slice(0, 40)}${spec.stamp ? ' [00:05]' : ''}`;
    const finish = spec.finish ?? 'stop';
    const usage = { input: spec.usage?.input ?? 12, output: spec.usage?.output ?? Math.max(1, Math.ceil(text.length / 4)) };

    if (spec.raw !== undefined) {
      res.writeHead(200, { ...cors, 'content-type': spec.contentType ?? 'text/event-stream', ...extraHeaders });
      const list = Array.isArray(spec.raw) ? spec.raw : [spec.raw];
      for (const piece of list) {
        res.write(piece);
        if (spec.delayMs) await sleep(spec.delayMs);
      }
      res.end();
      return;
    }

    if (!record.stream) {
      send(200, wholeReply(kind, { id, model, text, finish, usage }), extraHeaders);
      return;
    }

    // ---- streaming
    const deltas = chunksOf(text, spec.chunkSize ?? (spec.huge ? 16384 : 8));
    const events = streamEvents(kind, { id, model, text, deltas, finish, usage, streamError: spec.streamError, includeUsage: body?.stream_options?.include_usage === true });
    const nl = spec.crlf ? '\r\n' : '\n';
    const encode = (ev) => {
      let s = '';
      if (spec.comments) s += `: keep-alive${nl}`;
      if (ev.event) s += `event: ${ev.event}${nl}`;
      s += `data: ${ev.data}${nl}${nl}`;
      return Buffer.from(s, 'utf8');
    };
    res.writeHead(200, {
      ...cors,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      ...extraHeaders,
    });
    res.flushHeaders();
    // Each write resolves once its bytes are handed to the socket, so a later hang/disconnect never loses
    // what was "sent" before it.
    const write = (buf) =>
      new Promise((resolve) => {
        if (res.destroyed) return resolve(false);
        const onClose = () => resolve(false);
        res.once('close', onClose);
        res.write(buf, () => {
          res.off('close', onClose);
          resolve(!res.destroyed);
        });
      });
    let sentDeltas = 0;
    for (const ev of events) {
      // Hang / disconnect before delta number n+1, or before the terminal events of a shorter reply.
      if (ev.isDelta || ev.terminal) {
        if (spec.hangAfter !== undefined && sentDeltas >= spec.hangAfter) return; // keep the socket open
        if (spec.disconnectAfter !== undefined && sentDeltas >= spec.disconnectAfter) {
          res.socket?.destroy();
          return;
        }
      }
      if (ev.terminal && spec.omitDone) break;
      const buf = encode(ev);
      if (spec.splitBytes) {
        for (let i = 0; i < buf.length; i += spec.splitBytes) {
          if (!(await write(buf.subarray(i, i + spec.splitBytes)))) return;
          if (spec.delayMs) await sleep(spec.delayMs);
        }
      } else {
        if (!(await write(buf))) return;
        if (spec.delayMs) await sleep(spec.delayMs);
      }
      if (ev.isDelta) sentDeltas++;
      if (ev.fatal) break;
    }
    res.end();
  });
  // Keep idle keep-alive sockets open far longer than any pause between requests: Node closes
  // them after 5 s by default, and a client reusing one at that moment gets ECONNRESET (seen on
  // a loaded machine between two tests).
  server.keepAliveTimeout = 120_000;
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const actual = server.address().port;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shownHost}:${actual}`,
    port: actual,
    requests,
    setScript(fn) {
      current = fn ?? {};
    },
    close() {
      return new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
        server.closeAllConnections?.();
      });
    },
  };
}

function wholeReply(kind, { id, model, text, finish, usage }) {
  const created = Math.floor(Date.now() / 1000);
  if (kind === 'chat') {
    return {
      id: `chatcmpl-mock${id}`,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: finish }],
      usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
    };
  }
  if (kind === 'responses') {
    const incomplete = finish === 'length';
    return {
      id: `resp_mock${id}`,
      object: 'response',
      created_at: created,
      status: incomplete ? 'incomplete' : 'completed',
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      error: null,
      model,
      output: [
        {
          type: 'message',
          id: `msg_mock${id}`,
          status: incomplete ? 'incomplete' : 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text, annotations: [] }],
        },
      ],
      usage: { input_tokens: usage.input, output_tokens: usage.output, total_tokens: usage.input + usage.output },
    };
  }
  return {
    id: `msg_mock${id}`,
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text }],
    stop_reason: finish === 'length' ? 'max_tokens' : finish === 'stop' ? 'end_turn' : finish,
    stop_sequence: null,
    usage: { input_tokens: usage.input, output_tokens: usage.output },
  };
}

/** The event list of one streamed reply: [{event?, data, isDelta?, terminal?, fatal?}]. */
function streamEvents(kind, { id, model, text, deltas, finish, usage, streamError, includeUsage }) {
  const out = [];
  const created = Math.floor(Date.now() / 1000);
  const errAt = streamError ? Math.min(streamError.after ?? 0, deltas.length) : -1;
  const errEvent = () => {
    const message = streamError.message ?? 'Overloaded';
    if (kind === 'anthropic') {
      return { event: 'error', data: JSON.stringify({ type: 'error', error: { type: streamError.type ?? 'overloaded_error', message } }), fatal: true };
    }
    if (kind === 'responses') {
      return {
        event: 'response.failed',
        data: JSON.stringify({
          type: 'response.failed',
          sequence_number: 999,
          response: { id: `resp_mock${id}`, object: 'response', status: 'failed', error: { code: streamError.type ?? 'server_error', message }, output: [] },
        }),
        fatal: true,
      };
    }
    return { data: JSON.stringify({ error: { message, type: streamError.type ?? 'server_error', param: null, code: null } }), fatal: true };
  };

  if (kind === 'chat') {
    const base = { id: `chatcmpl-mock${id}`, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_mock' };
    out.push({ data: JSON.stringify({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }] }) });
    deltas.forEach((d, i) => {
      if (i === errAt) out.push(errEvent());
      out.push({ data: JSON.stringify({ ...base, choices: [{ index: 0, delta: { content: d }, logprobs: null, finish_reason: null }] }), isDelta: true });
    });
    if (errAt === deltas.length) out.push(errEvent());
    out.push({ data: JSON.stringify({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: finish }] }), terminal: true });
    if (includeUsage) {
      out.push({ data: JSON.stringify({ ...base, choices: [], usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } }), terminal: true });
    }
    out.push({ data: '[DONE]', terminal: true });
    return out;
  }

  if (kind === 'responses') {
    let n = 0;
    const ev = (type, fields, extra = {}) => ({ event: type, data: JSON.stringify({ type, sequence_number: n++, ...fields }), ...extra });
    const itemId = `msg_mock${id}`;
    const respBase = { id: `resp_mock${id}`, object: 'response', created_at: created, model, output: [], usage: null, error: null, incomplete_details: null };
    out.push(ev('response.created', { response: { ...respBase, status: 'in_progress' } }));
    out.push(ev('response.in_progress', { response: { ...respBase, status: 'in_progress' } }));
    out.push(ev('response.output_item.added', { output_index: 0, item: { id: itemId, type: 'message', status: 'in_progress', role: 'assistant', content: [] } }));
    out.push(ev('response.content_part.added', { item_id: itemId, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }));
    deltas.forEach((d, i) => {
      if (i === errAt) out.push(errEvent());
      out.push(ev('response.output_text.delta', { item_id: itemId, output_index: 0, content_index: 0, delta: d, logprobs: [] }, { isDelta: true }));
    });
    if (errAt === deltas.length) out.push(errEvent());
    const incomplete = finish === 'length';
    const part = { type: 'output_text', text, annotations: [] };
    const item = { id: itemId, type: 'message', status: incomplete ? 'incomplete' : 'completed', role: 'assistant', content: [part] };
    out.push(ev('response.output_text.done', { item_id: itemId, output_index: 0, content_index: 0, text, logprobs: [] }, { terminal: true }));
    out.push(ev('response.content_part.done', { item_id: itemId, output_index: 0, content_index: 0, part }, { terminal: true }));
    out.push(ev('response.output_item.done', { output_index: 0, item }, { terminal: true }));
    const final = {
      ...respBase,
      status: incomplete ? 'incomplete' : 'completed',
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      output: [item],
      usage: { input_tokens: usage.input, output_tokens: usage.output, total_tokens: usage.input + usage.output },
    };
    out.push(ev(incomplete ? 'response.incomplete' : 'response.completed', { response: final }, { terminal: true }));
    return out;
  }

  // anthropic
  const ev = (type, fields, extra = {}) => ({ event: type, data: JSON.stringify({ type, ...fields }), ...extra });
  out.push(
    ev('message_start', {
      message: {
        id: `msg_mock${id}`,
        type: 'message',
        role: 'assistant',
        content: [],
        model,
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: usage.input, output_tokens: 1 },
      },
    }),
  );
  out.push(ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
  out.push(ev('ping', {}));
  deltas.forEach((d, i) => {
    if (i === errAt) out.push(errEvent());
    out.push(ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: d } }, { isDelta: true }));
  });
  if (errAt === deltas.length) out.push(errEvent());
  out.push(ev('content_block_stop', { index: 0 }, { terminal: true }));
  const stop = finish === 'length' ? 'max_tokens' : finish === 'stop' ? 'end_turn' : finish;
  out.push(ev('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: usage.output } }, { terminal: true }));
  out.push(ev('message_stop', {}, { terminal: true }));
  return out;
}

// ------------------------------------------------------------------------------------------------ standalone

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
  };
  const mock = await startMockLlm({ port: Number(opt('--port', 8787)), host: opt('--host', '127.0.0.1'), script: { stamp: true, delayMs: Number(opt('--delay', 20)) } });
  console.log(mock.url);
  const stop = async () => {
    await mock.close();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
