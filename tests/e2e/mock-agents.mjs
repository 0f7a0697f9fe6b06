// Scripted mock agent servers (node:http, no dependencies), sibling of mock-llm.mjs, for the agent
// provider kinds of extension/lib/agents.js (its header describes the real servers these imitate):
//
// startMockHermes — Hermes Agent's API server:
//   POST /v1/runs → 202 {run_id, status: "started"}     GET /v1/runs/{id}/events → SSE `data: {event, run_id, …}`
//   POST /v1/runs/{id}/stop → {run_id, status: "stopping"} (a waiting stream then ends with run.cancelled)
//   GET /health → {status: "ok", platform: "hermes-agent"}   GET /v1/models → {object: "list", data: [{id}]}
// startMockOpencode — opencode's server:
//   POST /session → {id, title, …}   POST /session/{id}/prompt_async → 204 (404 NotFoundError for an unknown id)
//   GET /event → SSE `data: {type, properties}` (server.connected first; the turn's events go to every subscriber)
//   POST /session/{id}/abort → true (the turn ends: aborted assistant message, session idle)
//   GET /global/health → {healthy: true, version}   GET /config → {}   GET /config/providers → {providers, default}
//
// Both record every request in `mock.requests` ({method, path, kind, headers, body}) and take a script
// (req → reply spec, or a spec object; `mock.setScript`). With `apiKey` (Hermes: Bearer) or `password`
// (opencode: Basic `opencode:<password>`) set, a request without it gets 401.
// Reply spec (all optional):
//   text            the reply (default: `Agent reply to: <first 40 chars of the turn's text>`)
//   chunkSize       chars per delta (default 8)        delayMs   pause between events (default 0)
//   usage           {input, output} token counts
//   status          ≥ 400 → that HTTP error for the POST (/v1/runs, prompt_async) with `message`
//   eventsStatus    ≥ 400 → that HTTP error for the event stream (Hermes)
//   html            true → the event stream is an HTML page (Hermes)
//   noRunId         true → the POST answers {status: "started"} without run_id (Hermes)
//   fail            a message → after the deltas, run.failed (Hermes) / session.error (opencode)
//   reasoning       text sent as reasoning.available (Hermes) / a reasoning part (opencode) first
//   tools           true → tool.started/tool.completed (Hermes) / a tool part (opencode) before the text
//   malformedAfter  n → after n deltas a `data:` line that is not JSON
//   hangAfter       n → after n deltas nothing more (the connection stays open until stop/abort or close)
//   disconnectAfter n → after n deltas the stream's socket is destroyed
//   endAfter        n → after n deltas the stream ends cleanly without a terminal event
//   done            true → `data: [DONE]` after run.completed (Hermes)
//   mode            opencode: 'delta' (default: message.part.delta events) or 'snapshot' (message.part.updated
//                   with the whole text so far and `delta`, as older servers send)
//   noise           opencode: true → events of another session and the user message's own parts interleaved
//   finish          opencode: the assistant message's `finish` (default "stop")
//
// Standalone: `node tests/e2e/mock-agents.mjs [--port-hermes 8642] [--port-opencode 4096]`.

import http from 'node:http';
import { pathToFileURL } from 'node:url';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function chunksOf(text, size) {
  const out = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

async function readBody(req) {
  const bufs = [];
  for await (const b of req) bufs.push(b);
  const raw = Buffer.concat(bufs).toString('utf8');
  let body = null;
  try {
    body = raw ? JSON.parse(raw) : null;
  } catch {
    body = null;
  }
  return { raw, body };
}

function sendJson(res, status, obj, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', 'access-control-allow-origin': '*', ...headers });
  res.end(JSON.stringify(obj));
}

/** Resolves once what was written to `res` has left for the socket (a destroy then loses nothing). */
function flushed(res) {
  return new Promise((r) => res.write('', () => r()));
}

function sseHead(res) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'access-control-allow-origin': '*' });
  res.flushHeaders?.();
}

/** Common server plumbing: request records, scripts, sockets to close. */
async function serve({ port, host, script, route }) {
  let current = script ?? {};
  const requests = [];
  const sockets = new Set();
  const server = http.createServer(async (req, res) => {
    if (req.method === 'OPTIONS') {
      res.writeHead(204, { 'access-control-allow-origin': '*', 'access-control-allow-headers': '*', 'access-control-allow-methods': '*' });
      res.end();
      return;
    }
    const { raw, body } = await readBody(req);
    const path = new URL(req.url, 'http://x').pathname;
    const record = { method: req.method, path, kind: null, headers: { ...req.headers }, body, rawBody: raw };
    requests.push(record);
    const spec = async (extra) => {
      const s = typeof current === 'function' ? await current({ ...record, ...extra }) : current;
      return s ?? {};
    };
    try {
      await route({ req, res, path, record, spec });
    } catch (e) {
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(e?.message ?? e) } });
      else res.destroy();
    }
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((r) => server.listen(port, host, r));
  const addr = server.address();
  return {
    url: `http://${host}:${addr.port}`,
    port: addr.port,
    requests,
    setScript(s) {
      current = s ?? {};
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

function unauthorized(res, message = 'Invalid API key') {
  sendJson(res, 401, { error: { message, type: 'invalid_request_error', code: 'invalid_api_key' } });
}

// ------------------------------------------------------------------------------------------------ Hermes

/**
 * @returns {Promise<{url: string, port: number, requests: object[], setScript: Function, close: () => Promise<void>}>}
 */
export async function startMockHermes({ port = 0, host = '127.0.0.1', script, apiKey, models = ['hermes-agent'] } = {}) {
  const runs = new Map(); // run_id → {spec, body, stopped, wake}
  let seq = 0;
  const authed = (req) => !apiKey || req.headers.authorization === `Bearer ${apiKey}`;
  return serve({
    port,
    host,
    script,
    async route({ req, res, path, record, spec }) {
      let m;
      if (req.method === 'GET' && path === '/health') {
        record.kind = 'health';
        return sendJson(res, 200, { status: 'ok', platform: 'hermes-agent' });
      }
      if (!authed(req)) return unauthorized(res);
      if (req.method === 'GET' && path === '/v1/models') {
        record.kind = 'models';
        return sendJson(res, 200, { object: 'list', data: models.map((id) => ({ id, object: 'model', owned_by: 'hermes' })) });
      }
      if (req.method === 'POST' && path === '/v1/runs') {
        record.kind = 'runs';
        const s = await spec({ kind: 'runs' });
        if (s.status >= 400) return sendJson(res, s.status, { error: { message: s.message ?? `Mock error ${s.status}`, type: 'invalid_request_error' } });
        if (!record.body?.input) return sendJson(res, 400, { error: { message: "Missing 'input' field", type: 'invalid_request_error' } });
        if (s.noRunId) return sendJson(res, 202, { status: 'started' });
        const id = `run_${++seq}`;
        runs.set(id, { spec: s, body: record.body, stopped: false, wake: null });
        return sendJson(res, 202, { run_id: id, status: 'started', replayed: false });
      }
      if ((m = /^\/v1\/runs\/([^/]+)\/events$/.exec(path)) && req.method === 'GET') {
        record.kind = 'runs.events';
        const run = runs.get(decodeURIComponent(m[1]));
        if (!run) return sendJson(res, 404, { error: { message: `Run not found: ${m[1]}`, code: 'run_not_found' } });
        const s = run.spec;
        if (s.eventsStatus >= 400) return sendJson(res, s.eventsStatus, { error: { message: s.message ?? `Mock error ${s.eventsStatus}` } });
        if (s.html) {
          res.writeHead(200, { 'content-type': 'text/html' });
          return res.end('<!doctype html><title>Not the API</title>');
        }
        return hermesEvents(res, decodeURIComponent(m[1]), run);
      }
      if ((m = /^\/v1\/runs\/([^/]+)\/stop$/.exec(path)) && req.method === 'POST') {
        record.kind = 'runs.stop';
        const id = decodeURIComponent(m[1]);
        const run = runs.get(id);
        if (!run) return sendJson(res, 404, { error: { message: `Run not found: ${id}`, code: 'run_not_found' } });
        run.stopped = true;
        run.wake?.();
        return sendJson(res, 200, { run_id: id, status: 'stopping' });
      }
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('Not Found');
    },
  });
}

async function hermesEvents(res, runId, run) {
  const s = run.spec;
  sseHead(res);
  const frame = (event, fields = {}) => res.write(`data: ${JSON.stringify({ event, run_id: runId, timestamp: Date.now() / 1000, ...fields })}\n\n`);
  const pause = () => (s.delayMs ? sleep(s.delayMs) : Promise.resolve());
  const input = typeof run.body?.input === 'string' ? run.body.input : JSON.stringify(run.body?.input ?? '');
  const text = s.text ?? `Agent reply to: ${input.slice(0, 40)}`;
  res.write(': keepalive\n\n');
  if (s.reasoning) frame('reasoning.available', { text: s.reasoning });
  if (s.tools) {
    frame('tool.started', { tool: 'web_search', preview: 'searching' });
    await pause();
    frame('tool.completed', { tool: 'web_search', duration: 0.5, error: false });
  }
  const deltas = chunksOf(text, s.chunkSize ?? 8);
  for (const [i, d] of deltas.entries()) {
    if (s.malformedAfter === i) return res.end('data: {not json\n\n');
    if (s.hangAfter === i) {
      await new Promise((r) => {
        run.wake = r;
        res.on('close', r);
      });
      if (run.stopped && !res.destroyed) {
        frame('run.cancelled');
        res.end(': stream closed\n\n');
      }
      return;
    }
    if (s.disconnectAfter === i) {
      await flushed(res);
      return res.destroy();
    }
    if (s.endAfter === i) return res.end(': stream closed\n\n');
    await pause();
    frame('message.delta', { delta: d });
  }
  await pause();
  if (s.fail) frame('run.failed', { error: s.fail });
  else {
    const usage = s.usage ? { input_tokens: s.usage.input, output_tokens: s.usage.output, total_tokens: s.usage.input + s.usage.output } : { input_tokens: 0, output_tokens: 0, total_tokens: 0 };
    frame('run.completed', { output: text, usage });
  }
  if (s.done) res.write('data: [DONE]\n\n');
  res.end(': stream closed\n\n');
}

// ------------------------------------------------------------------------------------------------ opencode

/**
 * @returns {Promise<{url: string, port: number, requests: object[], sessions: Map, setScript: Function,
 *   close: () => Promise<void>}>}
 */
export async function startMockOpencode({ port = 0, host = '127.0.0.1', script, password, version = '0.0.0-mock' } = {}) {
  const sessions = new Map(); // id → {id, title, prompts: [body], turn}
  const subscribers = new Set();
  let seq = 0;
  const authed = (req) => !password || req.headers.authorization === `Basic ${Buffer.from(`opencode:${password}`).toString('base64')}`;
  const broadcast = (type, properties) => {
    const line = `data: ${JSON.stringify({ type, properties })}\n\n`;
    for (const res of subscribers) if (!res.destroyed) res.write(line);
  };
  const mock = await serve({
    port,
    host,
    script,
    async route({ req, res, path, record, spec }) {
      let m;
      if (!authed(req)) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="opencode"', 'content-type': 'text/plain' });
        return res.end('Unauthorized');
      }
      if (req.method === 'GET' && path === '/global/health') {
        record.kind = 'health';
        return sendJson(res, 200, { healthy: true, version });
      }
      if (req.method === 'GET' && path === '/config') {
        record.kind = 'config';
        return sendJson(res, 200, {});
      }
      if (req.method === 'GET' && path === '/config/providers') {
        record.kind = 'providers';
        return sendJson(res, 200, {
          providers: [
            { id: 'anthropic', name: 'Anthropic', models: { 'claude-mock': { id: 'claude-mock' } } },
            { id: 'openai', name: 'OpenAI', models: { 'gpt-mock': { id: 'gpt-mock' } } },
          ],
          default: { anthropic: 'claude-mock' },
        });
      }
      if (req.method === 'GET' && path === '/event') {
        record.kind = 'event';
        sseHead(res);
        subscribers.add(res);
        res.on('close', () => subscribers.delete(res));
        res.write(`data: ${JSON.stringify({ type: 'server.connected', properties: {} })}\n\n`);
        return;
      }
      if (req.method === 'POST' && path === '/session') {
        record.kind = 'session.create';
        const id = `ses_mock${++seq}`;
        const s = { id, title: record.body?.title ?? `New session ${seq}`, prompts: [], turn: null };
        sessions.set(id, s);
        return sendJson(res, 200, { id, title: s.title, version, time: { created: Date.now(), updated: Date.now() } });
      }
      if ((m = /^\/session\/([^/]+)\/prompt_async$/.exec(path)) && req.method === 'POST') {
        record.kind = 'prompt';
        const id = decodeURIComponent(m[1]);
        const s = sessions.get(id);
        if (!s) return sendJson(res, 404, { name: 'NotFoundError', data: { message: `Session not found: ${id}` } });
        const sp = await spec({ kind: 'prompt', sessionID: id });
        if (sp.status >= 400) return sendJson(res, sp.status, { name: 'BadRequest', data: { message: sp.message ?? `Mock error ${sp.status}` } });
        s.prompts.push(record.body);
        res.writeHead(204, { 'access-control-allow-origin': '*' });
        res.end();
        runTurn(s, sp, record.body).catch(() => {});
        return;
      }
      if ((m = /^\/session\/([^/]+)\/abort$/.exec(path)) && req.method === 'POST') {
        record.kind = 'abort';
        const s = sessions.get(decodeURIComponent(m[1]));
        if (s?.turn) {
          s.turn.aborted = true;
          s.turn.wake?.();
        }
        return sendJson(res, 200, true);
      }
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('Not Found');
    },
  });

  async function runTurn(s, sp, body) {
    const turn = { aborted: false, wake: null };
    s.turn = turn;
    const n = ++seq;
    const userID = `msg_u${n}`;
    const asstID = `msg_a${n}`;
    const partID = `prt_t${n}`;
    const pause = () => (sp.delayMs ? sleep(sp.delayMs) : Promise.resolve());
    const userText = (body?.parts ?? []).filter((p) => p?.type === 'text').map((p) => p.text).join('\n');
    const text = sp.text ?? `Agent reply to: ${userText.slice(0, 40)}`;
    const info = (extra = {}) => ({ id: asstID, sessionID: s.id, role: 'assistant', parentID: userID, time: { created: Date.now() }, tokens: { input: 0, output: 0, reasoning: 0, cache: { read: 0, write: 0 } }, ...extra });
    const other = 'ses_someone_else';
    // the user message and its parts come first (as opencode's createUserMessage publishes them)
    broadcast('message.updated', { info: { id: userID, sessionID: s.id, role: 'user', time: { created: Date.now() } } });
    broadcast('message.part.updated', { part: { id: `prt_u${n}`, sessionID: s.id, messageID: userID, type: 'text', text: userText } });
    for (const [i, f] of (body?.parts ?? []).filter((p) => p?.type === 'file').entries()) {
      broadcast('message.part.updated', { part: { id: `prt_f${n}_${i}`, sessionID: s.id, messageID: userID, type: 'file', mime: f.mime, filename: f.filename, url: f.url } });
    }
    broadcast('session.status', { sessionID: s.id, status: { type: 'busy' } });
    await pause();
    broadcast('message.updated', { info: info() });
    if (sp.noise) {
      broadcast('message.updated', { info: { id: 'msg_x', sessionID: other, role: 'assistant' } });
      broadcast('message.part.updated', { part: { id: 'prt_x', sessionID: other, messageID: 'msg_x', type: 'text', text: 'NOT YOURS' } });
      broadcast('message.part.delta', { sessionID: other, messageID: 'msg_x', partID: 'prt_x', field: 'text', delta: 'NOT YOURS EITHER' });
    }
    if (sp.reasoning) {
      broadcast('message.part.updated', { part: { id: `prt_r${n}`, sessionID: s.id, messageID: asstID, type: 'reasoning', text: sp.reasoning } });
    }
    if (sp.tools) {
      broadcast('message.part.updated', { part: { id: `prt_tool${n}`, sessionID: s.id, messageID: asstID, type: 'tool', tool: 'webfetch', state: { status: 'running' } } });
      await pause();
      broadcast('message.part.updated', { part: { id: `prt_tool${n}`, sessionID: s.id, messageID: asstID, type: 'tool', tool: 'webfetch', state: { status: 'completed' } } });
    }
    broadcast('message.part.updated', { part: { id: partID, sessionID: s.id, messageID: asstID, type: 'text', text: '' } });
    let sofar = '';
    const deltas = chunksOf(text, sp.chunkSize ?? 8);
    for (const [i, d] of deltas.entries()) {
      if (sp.malformedAfter === i) {
        for (const r of subscribers) r.write('data: {not json\n\n');
        return;
      }
      if (sp.hangAfter === i) {
        await new Promise((r) => {
          turn.wake = r;
        });
        if (turn.aborted) {
          broadcast('message.updated', { info: info({ error: { name: 'MessageAbortedError', data: { message: 'The operation was aborted.' } } }) });
          broadcast('session.status', { sessionID: s.id, status: { type: 'idle' } });
          broadcast('session.idle', { sessionID: s.id });
        }
        return;
      }
      if (sp.disconnectAfter === i) {
        for (const r of subscribers) await flushed(r);
        for (const r of subscribers) r.destroy();
        return;
      }
      if (sp.endAfter === i) {
        for (const r of subscribers) r.end();
        return;
      }
      await pause();
      sofar += d;
      if (sp.mode === 'snapshot') broadcast('message.part.updated', { part: { id: partID, sessionID: s.id, messageID: asstID, type: 'text', text: sofar }, delta: d });
      else broadcast('message.part.delta', { sessionID: s.id, messageID: asstID, partID, field: 'text', delta: d });
      if (sp.noise && i === 0) broadcast('message.part.updated', { part: { id: `prt_u${n}`, sessionID: s.id, messageID: userID, type: 'text', text: userText } });
    }
    await pause();
    if (sp.fail) {
      broadcast('session.error', { sessionID: s.id, error: { name: 'APIError', data: { message: sp.fail } } });
    } else {
      broadcast('message.part.updated', { part: { id: partID, sessionID: s.id, messageID: asstID, type: 'text', text, time: { start: 0, end: Date.now() } } });
      const tokens = { input: sp.usage?.input ?? 0, output: sp.usage?.output ?? 0, reasoning: 0, cache: { read: 0, write: 0 } };
      broadcast('message.updated', { info: info({ tokens, finish: sp.finish ?? 'stop', time: { created: Date.now(), completed: Date.now() } }) });
    }
    broadcast('session.status', { sessionID: s.id, status: { type: 'idle' } });
    broadcast('session.idle', { sessionID: s.id });
    s.turn = null;
  }

  return {
    ...mock,
    sessions,
    /** Forget a session, as a restarted server would (its next prompt gets 404). */
    dropSession(id) {
      sessions.delete(id);
    },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const arg = (name, dflt) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? Number(process.argv[i + 1]) : dflt;
  };
  const hermes = await startMockHermes({ port: arg('--port-hermes', 8642), script: { delayMs: 40 } });
  const oc = await startMockOpencode({ port: arg('--port-opencode', 4096), script: { delayMs: 40 } });
  console.log(`Hermes mock: ${hermes.url}\nopencode mock: ${oc.url}`);
}
