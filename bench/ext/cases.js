// The benchmark cases as the service worker runs them, both ways: Keepsake (the real turns.js,
// lib/storage.js and lib/native-port.js talking to the real release host) and the in-browser way
// (baseline.js). The driver (bench/run.mjs) calls `self.__bench.*` through Playwright; every time
// is taken here, in the worker, with performance.now().
//
// The LLM is the only fake: `fetch` to the provider is replaced by a function that records when
// the request body string was handed over and answers a short SSE stream, so a turn's time is its
// storage and request work only. Both ways stream through the same lib/llm.js.

import { createTurns } from '../background/turns.js';
import { BodyMemory } from '../background/body-memory.js';
import { ImageCache } from '../background/image-cache.js';
import { parseDataUrl } from '../background/image-tokens.js';
import { IMAGE_REF_PREFIX } from '../lib/entries.js';
import { NativePort } from '../lib/native-port.js';
import * as baseline from './baseline.js';
import { chatHistory, imageSlots, mixedText, rng, savedSession, sessionsDocument } from './gen.js';

/** The bench's own native host (examples/echo_host.rs), registered beside keepsake-host. */
const ECHO_HOST = 'dev.keepsake.bench_echo';

const PROVIDER = { id: 'bench', name: 'Bench', kind: 'chat', baseUrl: 'http://127.0.0.1:9/v1', apiKey: '', model: 'bench-model' };
const SETTINGS = { providers: [PROVIDER], activeProvider: 'bench', systemPrompt: 'You are a helpful assistant.' };

const { port, storage } = self.__keepsake;
const now = () => performance.now();

// ---- the fake provider ------------------------------------------------------------------------

const provider = { at: 0, body: '', reply: 'OK.' };

function sse(text) {
  const ev = (o) => `data: ${JSON.stringify(o)}\n\n`;
  return `${ev({ choices: [{ delta: { content: text }, finish_reason: null }] })}${ev({ choices: [{ delta: {}, finish_reason: 'stop' }] })}data: [DONE]\n\n`;
}

/** `fetch` for the provider: notes when the body string was ready, answers `provider.reply`. */
async function fakeFetch(_url, init) {
  provider.at = now();
  provider.body = init.body;
  return new Response(sse(provider.reply), { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

/** Image bytes this worker holds (pictures it sent or showed), as turns.js keeps them. */
const imageCache = new ImageCache();
/** The last body turns.js holds, when it builds bodies as deltas (its counts go into the report). */
const bodyMemory = new BodyMemory();
/** The argument names of the last `request.build` turns.js made (shows whether it asks for deltas). */
let lastBuildArgs = [];
/**
 * Every storage call turns.js makes, while `calls` is an array: `{op, start, end}` in ms of the
 * worker's clock (scenario 4 reports them relative to the send, to show where a turn's time goes).
 */
let calls = null;
const traced = Object.fromEntries(
  Object.entries(storage).map(([ns, api]) => {
    if (!api || typeof api !== 'object') return [ns, api];
    const wrapped = {};
    for (const [name, fn] of Object.entries(api)) {
      if (typeof fn !== 'function') {
        wrapped[name] = fn;
        continue;
      }
      wrapped[name] = (args, opts) => {
        if (ns === 'request' && name === 'build') lastBuildArgs = Object.keys(args ?? {});
        const start = now();
        const p = fn.call(api, args, opts);
        const list = calls;
        if (list) {
          const rec = { op: `${ns}.${name}`, start, end: null };
          list.push(rec);
          Promise.resolve(p).then(
            () => (rec.end = now()),
            () => (rec.end = now()),
          );
        }
        return p;
      };
    }
    return [ns, wrapped];
  }),
);
/** The last `chat.error` a bench turn reported (a failed turn must not pass for a fast one). */
let turnError = null;
const broadcast = (event) => {
  if (event.type === 'chat.error') turnError = event.error;
};
const turns = createTurns({ storage: traced, imageCache, bodyMemory, events: port, fetchImpl: fakeFetch, broadcast });

// ---- inputs -----------------------------------------------------------------------------------

const pngUrls = new Map();

async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The data URL of a generated screenshot shipped in the test build (`bench/data/<name>.png`). */
async function png(name) {
  if (!pngUrls.has(name)) {
    const res = await fetch(chrome.runtime.getURL(`bench/data/${name}.png`));
    if (!res.ok) throw new Error(`bench/data/${name}.png: HTTP ${res.status}`);
    pngUrls.set(name, `data:image/png;base64,${baseline.bytesToBase64(new Uint8Array(await res.arrayBuffer()))}`);
  }
  return pngUrls.get(name);
}

const kept = new Map();

/**
 * Store a screenshot once in the host inside a saved session of its own (`storage.import`), so its
 * blob outlives every live-history reset, and return its image reference.
 */
async function keepImage(name) {
  if (!kept.has(name)) {
    const { mime, data } = parseDataUrl(await png(name));
    const sha = await sha256Hex(baseline.base64ToBytes(data));
    const ref = `${IMAGE_REF_PREFIX}${sha}`;
    const entries = [{ role: 'user', content: [{ type: 'text', text: name }, { type: 'image_url', image_url: { url: ref } }] }];
    const session = { id: `bench-keep-${name}`, name: `picture ${name}`, createdAt: 1_764_700_000_000, pinned: false, entries };
    const document = { format: 'keepsake.sessions', version: 1, exportedAt: '2026-12-03T00:00:00+00:00', sessions: [session], images: { [sha]: { mime, data } } };
    await storage.storage.import({ document });
    kept.set(name, ref);
  }
  return kept.get(name);
}

/**
 * A history state both ways can be reset to: `data` (image data URLs, for chrome.storage.local)
 * and `refs` (the same entries with the host's image references, so a reset sends no pixels).
 */
const states = new Map();

async function historyState(spec) {
  const key = JSON.stringify(spec);
  if (!states.has(key)) {
    const urls = await Promise.all(spec.shots.map(png));
    const refs = await Promise.all(spec.shots.map(keepImage));
    for (const u of urls) await imageCache.addDataUrl(u);
    const slots = imageSlots(spec.count, urls.length);
    const make = (list) => chatHistory({ ...spec, images: new Map(slots.map((i, k) => [i, [list[k]]])) });
    states.set(key, { data: make(urls), refs: make(refs) });
  }
  return states.get(key);
}

async function resetHistory(way, spec) {
  const st = await historyState(spec);
  if (way === 'keepsake') await storage.history.replace({ entries: st.refs });
  else await baseline.writeHistory(st.data);
}

// ---- the cases --------------------------------------------------------------------------------

/** Each case: `reset(way, round, p)` (untimed) and `run(way, round, p)` (timed) → `{ms, …}`. */
const cases = {};

/**
 * Sends through the real turns.js (Keepsake) or baseline.sendTurn. `ms` is the whole turn;
 * `bodyMs` the time until the request body string reached `fetch` (the send latency).
 */
async function sendBoth(way, { text, images = [], reply }) {
  provider.reply = reply;
  provider.at = 0;
  turnError = null;
  if (way === 'keepsake') await storage.history.meta(); // the port is open before the clock starts
  const t0 = now();
  if (way === 'keepsake') {
    await turns.send({ text, images });
    await turns.idle();
  } else {
    await baseline.sendTurn({ text, images, fetchImpl: fakeFetch });
  }
  const t1 = now();
  if (turnError || !provider.at) throw new Error(`the ${way} turn failed: ${JSON.stringify(turnError)}`);
  return { ms: t1 - t0, bodyMs: provider.at - t0, bodyLength: provider.body.length, t0 };
}

function turnText(round, chars) {
  return mixedText(rng(9_000 + round), chars);
}

/** Scenarios 1–3 and the sizes sweep: reset to `p.history`, then one turn. */
cases.turn = {
  reset: (way, _round, p) => resetHistory(way, p.history),
  async run(way, round, p) {
    const images = p.pasted ? [await png(p.pasted[round % p.pasted.length])] : [];
    const r = await sendBoth(way, { text: turnText(round, p.userChars), images, reply: turnText(500 + round, p.replyChars) });
    return p.measure === 'body' ? { ...r, ms: r.bodyMs } : r;
  },
};

/** Scenario 4: a long text conversation that goes on turn after turn (no reset between rounds). */
cases.textConversation = {
  async prepare(p) {
    await resetHistory('keepsake', p.history);
    await resetHistory('baseline', p.history);
    const doc = sessionsDocument({ seed: p.history.seed + 1, count: p.sessions, chars: p.sessionChars });
    await storage.storage.import({ document: doc });
    const index = doc.sessions.map(({ entries, ...row }) => ({ ...row, entryCount: entries.length }));
    const bodies = Object.fromEntries(doc.sessions.map((s) => [`session_${s.id}`, s.entries]));
    await chrome.storage.local.set({ savedSessions: index, ...bodies });
    return { sessions: doc.sessions.length };
  },
  reset: () => {},
  async run(way, round, p) {
    const args = { text: turnText(round, p.userChars), reply: turnText(700 + round, p.replyChars) };
    if (way === 'baseline') {
      const r = await sendBoth(way, args);
      return { ...r, ms: r.bodyMs, turnMs: r.ms };
    }
    const turnCalls = [];
    calls = turnCalls;
    let r;
    try {
      r = await sendBoth(way, args);
    } finally {
      calls = null;
    }
    // storage calls of the turn, ms after the send; `fetch` = the body reaching the provider
    const at = (x) => (x === null ? null : Math.round((x - r.t0) * 100) / 100);
    const trace = turnCalls.filter((c) => c.start >= r.t0).map((c) => ({ op: c.op, start: at(c.start), end: at(c.end) }));
    trace.push({ op: 'fetch', start: at(r.t0 + r.bodyMs), end: at(r.t0 + r.bodyMs) });
    return { ...r, ms: r.bodyMs, turnMs: r.ms, trace, buildArgs: lastBuildArgs, bodies: bodyMemory ? { ...bodyMemory.stats } : null };
  },
};

/**
 * Scenario 5: attach 20 screenshots and bound the live images to 8 MiB. The Keepsake way is the
 * product's 📷 path, which runs in the side panel, not here: bench/ext/attach-panel.js clicks it
 * in the real sidepanel.html. This worker only resets the live history (through its own port, which
 * the panel's history reads use) and runs the baseline.
 */
cases.attach = {
  async prepare(p) {
    await Promise.all(p.shots.map(png));
    return {};
  },
  async reset(way) {
    if (way === 'keepsake') {
      port.close(); // a fresh worker-side host too
      await storage.history.replace({ entries: [] });
    } else {
      await baseline.writeHistory([]);
    }
  },
  async run(way, _round, p) {
    if (way === 'keepsake') throw new Error('scenario 5 runs the Keepsake way in the side panel (bench/ext/attach-panel.js)');
    const urls = await Promise.all(p.shots.map(png));
    let rewritten = 0;
    const t0 = now();
    for (const [i, url] of urls.entries()) {
      const text = `[Page context attached by Keepsake]\nTitle: Dashboard ${i + 1}\nURL: https://example.com/dashboard/${i + 1}\nMode: screenshot`;
      const entry = { role: 'user', content: [{ type: 'text', text }, { type: 'image_url', image_url: { url } }], attachId: `b-${i}` };
      rewritten += await baseline.attachAndBound(entry);
    }
    return { ms: now() - t0, rewritten };
  },
};

/** Scenario 7: `p.appends` small appends onto a history holding 8 MiB of pictures. */
cases.appendBytes = {
  reset: (way, _round, p) => resetHistory(way, p.history),
  async run(way, round, p) {
    const t0 = now();
    for (let i = 0; i < p.appends; i++) {
      const entry = { role: i % 2 ? 'assistant' : 'user', content: turnText(round * 100 + i, 400) };
      if (way === 'keepsake') await storage.history.append({ entry });
      else await baseline.appendEntry(entry);
    }
    return { ms: now() - t0 };
  },
};

/** Scenario 8: full-text search over saved sessions; the baseline scans digests held in memory. */
let digests = null;
cases.search = {
  async prepare(p) {
    const sessions = [];
    for (let i = 0; i < p.count; i++) sessions.push(savedSession({ seed: p.seed, index: i, chars: p.chars }));
    let t0 = now();
    await baseline.storeDigests(sessions);
    const storeMs = now() - t0;
    t0 = now();
    digests = await baseline.loadDigests();
    const loadMs = now() - t0;
    const { total } = await storage.sessions.list({ limit: 1 });
    return { digests: digests.length, hostSessions: total, storeMs, loadMs };
  },
  reset: () => {},
  async run(way, _round, p) {
    if (way === 'keepsake') await storage.history.meta();
    const t0 = now();
    // both ways do the drawer's job: the first page of SEARCH_PAGE rows (snippets for those) and
    // how many the whole search found
    const page = way === 'keepsake'
      ? await storage.sessions.list({ query: p.query, limit: SEARCH_PAGE })
      : baseline.digestSearch(digests, p.query, { limit: SEARCH_PAGE });
    const t1 = now();
    return { ms: t1 - t0, hits: page.total, rows: page.rows.length, at0: performance.timeOrigin + t0, at1: performance.timeOrigin + t1 };
  },
};

/** Rows of the first page scenario 8 asks for (the drawer's page, sidepanel/drawer.js). */
export const SEARCH_PAGE = 50;

/** NativePorts to the echo host (scenarios 8 and 9). */
const ports = {};

/**
 * Scenario 8's channel floor: the echo host answers with the very `sessions.list` result
 * keepsake-host gave (written to a file by run.mjs), through a NativePort like the storage
 * client's. What is left of the round trip when the host's work costs nothing.
 */
cases.searchFloor = {
  reset: () => {},
  async run(_way, _round, p) {
    ports.floor ??= new NativePort({ connect: () => chrome.runtime.connectNative(ECHO_HOST) });
    await ports.floor.open();
    const t0 = now();
    const page = await ports.floor.request('bench.replay', { file: p.file, ...(p.spinUs ? { spinUs: p.spinUs } : {}) });
    const t1 = now();
    return { ms: t1 - t0, hits: page.total, at0: performance.timeOrigin + t0, at1: performance.timeOrigin + t1 };
  },
};

/** Scenario 9: spawn to the first `host.hello` reply through a fresh NativePort (the real client). */
cases.hello = {
  reset: () => {},
  async run(way) {
    const connect = way === 'keepsake' ? undefined : () => chrome.runtime.connectNative(ECHO_HOST);
    const p = new NativePort(connect ? { connect } : {});
    const t0 = now();
    await p.open();
    const ms = now() - t0;
    p.close();
    return { ms };
  },
};

/** Scenario 9: a chunked reply of the same bytes: `images.get` vs the echo host's prebuilt reply. */
cases.chunked = {
  async prepare(p) {
    const ref = await keepImage(p.shot);
    ports.echo = new NativePort({ connect: () => chrome.runtime.connectNative(ECHO_HOST) });
    const got = await storage.images.get({ ref });
    const replyChars = JSON.stringify({ id: 1, ok: true, result: got }).length;
    return { ref, mime: got.mime, b64Chars: got.bytes.length, replyChars };
  },
  reset: () => {},
  async run(way, _round, p) {
    if (way === 'keepsake') await storage.history.meta();
    else await ports.echo.open();
    const t0 = now();
    const r =
      way === 'keepsake'
        ? await storage.images.get({ ref: p.ref })
        : await ports.echo.request('bench.reply', { mime: p.mime, chars: p.b64Chars });
    return { ms: now() - t0, chars: r.bytes.length };
  },
};

// ---- the API the driver calls ------------------------------------------------------------------

let spare = null;

self.__bench = {
  /** One-time setup shared by every case: the provider card in both stores. */
  async init() {
    await storage.settings.set({ map: SETTINGS });
    await chrome.storage.local.set(SETTINGS);
    return { hello: port.hello ?? (await port.open()) };
  },
  /** Case setup (untimed); returns facts for the report. */
  prepare: (name, p) => cases[name].prepare?.(p) ?? {},
  reset: (name, way, round, p) => cases[name].reset(way, round, p),
  run: (name, way, round, p) => cases[name].run(way, round, p),
  /**
   * The request bodies of one turn both ways from the same state, for the equal-shape check:
   * message count and body length of each, and whether the two strings are identical.
   */
  async checkBodies(p) {
    const out = {};
    for (const way of ['keepsake', 'baseline']) {
      await cases.turn.reset(way, 0, p);
      await cases.turn.run(way, 0, p);
      const body = provider.body;
      out[way] = { messages: JSON.parse(body).messages.length, length: body.length, body };
    }
    const equal = out.keepsake.body === out.baseline.body;
    delete out.keepsake.body;
    delete out.baseline.body;
    return { ...out, equal };
  },
  /**
   * The in-browser way's building blocks on this machine, for comparison with the reference
   * figures: chrome.storage.local set / get of `p.history` and JSON.stringify of it, `rounds` times.
   */
  async calibrate(p, rounds) {
    const { data } = await historyState(p.history);
    const out = { set: [], get: [], stringify: [] };
    for (let i = 0; i < rounds; i++) {
      let t0 = now();
      await baseline.writeHistory(data);
      out.set.push(now() - t0);
      t0 = now();
      await baseline.readHistory();
      out.get.push(now() - t0);
      t0 = now();
      JSON.stringify(data);
      out.stringify.push(now() - t0);
    }
    return out;
  },
  /** URL chars of the pictures in the live history (after scenario 5's bounding). */
  async liveImageChars(way) {
    const entries = way === 'baseline' ? await baseline.readHistory() : (await storage.history.get({ images: 'inline' })).entries;
    return entries.reduce((n, e) => n + baseline.imageChars(e), 0);
  },
  /** Open (or close) an extra port to a fresh keepsake-host that does nothing (idle RSS). */
  async openSpare() {
    spare = new NativePort();
    await spare.open();
  },
  closeSpare() {
    spare?.close();
    spare = null;
  },
};
