// The scale sweep's cases in the bench service worker (bench/scale.mjs drives them through
// `self.__scale`): the same jobs at 100 → 1,000 → 10,000 saved sessions, Keepsake (lib/storage.js
// over the real release host, whose database `keepsake-host import` filled) and the in-browser way
// (chrome.storage.local as baseline.js keeps it: a `savedSessions` index, `session_<id>` bodies
// with pictures as data URLs, lower-cased digests for search). Every time is taken here with
// performance.now().

import * as baseline from './baseline.js';
import { NativePort } from '../lib/native-port.js';
import { entryText } from '../lib/entries.js';
import { BIG, PAGE, bigSession, scaleSession } from './scale-gen.js';

const { storage } = self.__keepsake;
const local = () => chrome.storage.local;
const now = () => performance.now();

/** Data URLs of the sweep's pictures (bench/scale/<name>.png in the test build), read once per size. */
const pictures = new Map();
async function pictureUrl(name) {
  if (!pictures.has(name)) {
    const res = await fetch(chrome.runtime.getURL(`bench/scale/${name}.png`));
    if (!res.ok) throw new Error(`bench/scale/${name}.png: HTTP ${res.status}`);
    pictures.set(name, `data:image/png;base64,${baseline.bytesToBase64(new Uint8Array(await res.arrayBuffer()))}`);
  }
  return pictures.get(name);
}

/** The in-browser way's digests, held in memory once written (what scenario 8 searches). */
let digests = null;
/** Whether `sessions.list` takes `limit` (the paged API); today's host rejects unknown args. */
let listTakesLimit = null;

/** A `sessions.list` result in either shape: a plain array, or `{rows, total, cursor}`. */
const rowsOf = (r) => (Array.isArray(r) ? r : (r?.rows ?? []));

function errorCode(e) {
  return e?.code ?? e?.error?.code ?? null;
}

async function keepsakeList(args) {
  if (listTakesLimit === null) {
    try {
      await storage.sessions.list({ limit: PAGE });
      listTakesLimit = true;
    } catch (e) {
      if (errorCode(e) !== 'bad_request') throw e;
      listTakesLimit = false;
    }
  }
  const r = await storage.sessions.list(listTakesLimit ? { ...args, limit: PAGE } : args);
  return rowsOf(r).slice(0, PAGE);
}

/** The live history the in-browser way makes of a loaded session (the trim rule, §4.1). */
const liveOf = (entries) => baseline.trim([...entries]);
const pictureCount = (entries) => entries.reduce((n, e) => n + (Array.isArray(e.content) ? e.content.filter((p) => p.type === 'image_url').length : 0), 0);

const cases = {
  /** The drawer's first page. Baseline: the `savedSessions` index read, sorted, cut. */
  async list(way) {
    const t0 = now();
    let rows;
    if (way === 'keepsake') rows = await keepsakeList({});
    else {
      const { savedSessions = [] } = await local().get('savedSessions');
      rows = savedSessions.sort((a, b) => Number(b.pinned) - Number(a.pinned) || b.createdAt - a.createdAt).slice(0, PAGE);
    }
    return { ms: now() - t0, rows: rows.length };
  },
  /** Full-text search. Baseline: the digest scan of scenario 8 (digests already in memory). */
  async search(way, p) {
    const t0 = now();
    const rows = way === 'keepsake' ? await keepsakeList({ query: p.query }) : baseline.digestSearch(digests, p.query, { limit: PAGE }).rows;
    return { ms: now() - t0, hits: rows.length };
  },
  /**
   * Load the 100-entry session into the live chat and read it as the panel does. Keepsake:
   * sessions.load (as turns.js `chat.loadSession`) then history.get with image references.
   * Baseline: its body read, trimmed and written as the live history, then read back.
   */
  async load(way) {
    const t0 = now();
    let entries;
    if (way === 'keepsake') {
      await storage.sessions.load({ id: BIG.id, saveCurrent: true });
      entries = (await storage.history.get({ images: 'ref' })).entries;
    } else {
      const key = `session_${BIG.id}`;
      const body = (await local().get(key))[key];
      await baseline.writeHistory(liveOf(body));
      entries = await baseline.readHistory();
    }
    return { ms: now() - t0, entries: entries.length };
  },
  /** Host start through a fresh NativePort (the real client): spawn → hello, → first history.meta. */
  async start() {
    const port = new NativePort();
    const t0 = now();
    await port.open();
    const hello = now() - t0;
    await port.request('history.meta', {});
    const meta = now() - t0;
    port.close();
    return { ms: hello, metaMs: meta };
  },
};

self.__scale = {
  /**
   * The in-browser way's copy of the data set, written in batches of 25 sessions until done or
   * `capMs` passes: `session_<id>` bodies (pictures as data URLs) and `digest_<id>` digests, then
   * the `savedSessions` and `digestIndex` indexes once; the digests are then read back into memory
   * (scenario 8's search). → {done, written, ms, chars, digestLoadMs, reason?}
   */
  async fill({ count, capMs }) {
    pictures.clear();
    digests = null;
    const t0 = now();
    const index = [];
    const digestIndex = [];
    let chars = 0;
    let written = 0;
    try {
      for (let i = 0; i < count; i += 25) {
        const batch = [];
        for (let j = i; j < Math.min(count, i + 25); j++) batch.push(scaleSession(j, (n) => `@${n}`));
        if (i + 25 >= count) batch.push(bigSession(count, (n) => `@${n}`));
        const items = {};
        for (const s of batch) {
          for (const e of s.entries) {
            if (!Array.isArray(e.content)) continue;
            for (const part of e.content) if (part.type === 'image_url') part.image_url.url = await pictureUrl(part.image_url.url.slice(1));
          }
          const { entries, ...row } = s;
          items[`session_${s.id}`] = entries;
          items[`digest_${s.id}`] = entries.map(entryText).join('\n').toLowerCase();
          index.push({ ...row, entryCount: entries.length });
          digestIndex.push(row);
          chars += JSON.stringify(entries).length;
        }
        pictures.clear();
        await local().set(items);
        written += batch.length;
        if (now() - t0 > capMs) return { done: false, written, ms: now() - t0, chars, reason: `time cap of ${Math.round(capMs / 1000)} s reached` };
      }
      await local().set({ savedSessions: index, digestIndex });
      const ms = now() - t0;
      const t1 = now();
      digests = await baseline.loadDigests();
      return { done: true, written, ms, chars, digestLoadMs: now() - t1 };
    } catch (e) {
      return { done: false, written, ms: now() - t0, chars, reason: String(e?.message ?? e) };
    }
  },
  /** Drop everything the in-browser way holds (between sizes the browser is new anyway). */
  async clear() {
    digests = null;
    pictures.clear();
    await local().clear();
  },
  /**
   * Put the big session in the live chat for a panel round (untimed): → the panel's expectation
   * `{bubbles, images}` (the live window of it: the trim rule keeps its newest 60 entries).
   */
  async panelReset(way) {
    if (way === 'keepsake') {
      await storage.sessions.load({ id: BIG.id, saveCurrent: true });
      const { entries } = await storage.history.get({ images: 'ref' });
      return { bubbles: entries.length, images: pictureCount(entries) };
    }
    const key = `session_${BIG.id}`;
    const live = liveOf((await local().get(key))[key]);
    await baseline.writeHistory(live);
    return { bubbles: live.length, images: pictureCount(live) };
  },
  /** One timed case: `name` in list | search | load | start. */
  run: (name, way, p = {}) => cases[name](way, p),
  /** Whether the host took `limit` (reported). */
  listTakesLimit: () => listTakesLimit,
};
