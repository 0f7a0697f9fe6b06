// Highlighting and math for renderMarkdown, off the page's thread. `richHooks(onSettled)` hands
// renderMarkdown its `highlight` and `math` hooks for one render of one reply; they answer at once:
//   - from the results cache (by kind + language + code, or display + formula): nodes built from the
//     rich worker's plain tree (lib/plain-tree.js `fromPlain`, through markdown.js's CODE_* / MATH_*
//     allow-lists; built once per result, then cloned), or plain / the formula's source;
//   - else `{pending: true}` (markdown.js shows the block plain, the formula as its source, for now) and a
//     job for the rich worker (lib/rich-worker.js, a module Worker from the extension's own URL) unless
//     one for the same key is queued or running; `onSettled({changed, done})` is called once when the jobs
//     this render waits for have answered (or PROGRESS_MS after a first visible answer while some still
//     run), and the page renders again — or, when every answer left its block plain (`changed: false`),
//     only drops the blocks' `data-md-pending` marks, which is all a new render would change.
// Nothing here parses HTML, and the page's thread never runs highlight.js or KaTeX.
//
// The time budget: the worker runs one job at a time; a job that has not answered RICH_BUDGET_MS after
// it was posted (the first formula's: after the worker said it started, as it loads KaTeX first, within
// STARTUP_MS; a timer that fires late because the page itself was busy waits LATE_MS more, once, for an
// answer queued behind it) is cut — the worker is terminated (the only way to stop a runaway regex) and a
// new one starts for the next job — and that block stays plain (that formula shows its source) for good:
// the result is cached, and the key's hash is kept under the chrome.storage.session key `richRefused` (at
// most REFUSED_MAX), so later renders and panel re-opens in this browser session do not send it again.
// The caps (lib/rich-limits.js): a block longer than HIGHLIGHT_MAX is not sent; per reply, code blocks
// past HIGHLIGHT_REPLY_MAX characters or HIGHLIGHT_REPLY_BLOCKS blocks, formulas past MATH_REPLY_MAX or
// past MATH_REPLY_NODES nodes (counted as the page builds them), stay plain. The results cache holds
// several replies at those caps. A worker that cannot start (no Worker, a load error) leaves every reply
// plain.
// KaTeX's stylesheet (lib/math.js ensureStylesheet, which loads no KaTeX code) is added to the page before
// the first formula is shown.

import { CODE_ATTRIBUTES, CODE_ELEMENTS, MATH_ATTRIBUTES, MATH_ELEMENTS, MATH_STYLES } from './markdown.js';
import { fromPlain } from './plain-tree.js';
import { sessionArea } from './platform.js';
import {
  HIGHLIGHT_MAX, HIGHLIGHT_NODES_MAX, HIGHLIGHT_REPLY_BLOCKS, HIGHLIGHT_REPLY_MAX, MATH_MAX, MATH_NODES_MAX, MATH_REPLY_MAX,
  MATH_REPLY_NODES, RICH_BUDGET_MS,
} from './rich-limits.js';

/** What a hook answers while the worker has not: markdown.js shows the block plain for now. */
export const PENDING = Object.freeze({ pending: true });
/** The chrome.storage.session key holding the hashes of jobs that overran their budget. */
export const REFUSED_KEY = 'richRefused';
/** How many overrun jobs are remembered (the oldest are forgotten first). */
export const REFUSED_MAX = 200;
/** Results kept (code blocks and formulas; the least recently used go first): at most this many, and
 *  at most RESULTS_WEIGHT characters of keys plus nodes of trees. Both hold several replies at their caps:
 *  a render never evicts what it is waiting for, so it cannot send the same job again and again. */
export const RESULTS_MAX = 2000;
export const RESULTS_WEIGHT = 8_000_000;
/** A render waiting for several jobs is told at least this often while some still run. */
export const PROGRESS_MS = 300;
/** How long the worker may take to load its modules before replies stay plain. */
export const STARTUP_MS = 20_000;
/** A budget timer that fires this late (the page's own thread was busy) waits this much more, once. */
export const LATE_MS = 100;

const CODE_POLICY = { elements: CODE_ELEMENTS, attributes: CODE_ATTRIBUTES, maxNodes: HIGHLIGHT_NODES_MAX };
const MATH_POLICY = { elements: MATH_ELEMENTS, attributes: MATH_ATTRIBUTES, styles: MATH_STYLES, maxNodes: MATH_NODES_MAX };

/** A 64-bit hash of `s` (two 32-bit lanes) and its length, as a short string: how an overrun is remembered. */
export function contentHash(s) {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return `${(h2 >>> 0).toString(36)}.${(h1 >>> 0).toString(36)}.${s.length.toString(36)}`;
}

function defaultWorker() {
  return new Worker(new URL('./rich-worker.js', import.meta.url), { type: 'module' });
}

async function defaultCss() {
  const m = await import('./math.js');
  await m.ensureStylesheet();
}

/**
 * The highlighter and math renderer of one page (tests make their own with a worker of their choice).
 * @param {{makeWorker?: () => Worker, area?: {get: Function, set: Function}, budgetMs?: number,
 *   ensureCss?: () => Promise<void>, startupMs?: number}} [opts]
 */
export function createRich({
  makeWorker = typeof Worker === 'function' ? defaultWorker : null,
  area = sessionArea(),
  budgetMs = RICH_BUDGET_MS,
  ensureCss = defaultCss,
  startupMs = STARTUP_MS,
} = {}) {
  /** key → {kind, tree, nodes, language, error, template, templateDoc}; `nodes` is the worker's count
   *  until the page builds the tree, then the page's own */
  const results = new Map();
  /** key → {id, key, kind, hash, msg, groups} for every job queued or running */
  const jobs = new Map();
  const queue = [];
  let current = null;
  let timer = 0;
  let worker = null;
  let ready = null;
  let broken = !makeWorker;
  let pumping = false;
  let refused = null;
  let cssReady = null;
  let katexReady = false; // whether the current worker has loaded KaTeX (it says `started` once it has)
  let nextId = 1;
  const stats = { workers: 0, jobs: 0, overruns: 0 };

  function loadRefused() {
    refused ??= Promise.resolve()
      .then(() => area.get(REFUSED_KEY))
      .then((v) => new Set(Array.isArray(v?.[REFUSED_KEY]) ? v[REFUSED_KEY].filter((x) => typeof x === 'string') : []))
      .catch(() => new Set());
    return refused;
  }

  async function remember(hash) {
    const set = await loadRefused();
    set.delete(hash);
    set.add(hash);
    while (set.size > REFUSED_MAX) set.delete(set.values().next().value);
    try {
      await area.set({ [REFUSED_KEY]: [...set] });
    } catch {
      // remembered for this page at least
    }
  }

  let weight = 0;

  function store(key, result) {
    if (results.has(key)) weight -= results.get(key).weight;
    results.delete(key);
    result.weight ??= key.length + (result.nodes || 0);
    results.set(key, result);
    weight += result.weight;
    while (results.size > RESULTS_MAX || (weight > RESULTS_WEIGHT && results.size > 1)) {
      const [oldKey, old] = results.entries().next().value;
      results.delete(oldKey);
      weight -= old.weight;
    }
  }

  function settle(job, result) {
    // what a render shows changes unless a code block stays plain (its pending mark aside)
    const visible = job.kind === 'math' || !!result.tree;
    const done = () => {
      jobs.delete(job.key);
      store(job.key, result);
      for (const g of job.groups) g.settled(job.key, visible);
    };
    if (job.kind === 'math' && result.tree) {
      cssReady ??= Promise.resolve().then(ensureCss).catch(() => {});
      cssReady.then(done);
    } else done();
  }

  const plainResult = (job) => (job.kind === 'math' ? { kind: 'math', error: true } : { kind: 'code', tree: null });

  function stopWorker() {
    if (worker) {
      try {
        worker.terminate();
      } catch {
        // already gone
      }
    }
    worker = null;
    ready = null;
  }

  function startWorker() {
    if (ready) return ready;
    stats.workers++;
    const w = makeWorker();
    worker = w;
    katexReady = false;
    ready = new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('the rich worker did not start')), startupMs); // i18n-ok: console only
      w.onmessage = (e) => {
        if (e.data?.type === 'ready') {
          clearTimeout(t);
          resolve();
        } else if (e.data?.type === 'started') restart(w, e.data.id);
        else answered(w, e.data);
      };
      w.onerror = (e) => {
        clearTimeout(t);
        reject(new Error(`the rich worker failed: ${e?.message || 'load error'}`)); // i18n-ok: console only
        if (w === worker) failed(e);
      };
    });
    return ready;
  }

  /** The worker died with an error after it started: the running job stays plain (not remembered). */
  function failed() {
    stopWorker();
    const job = current;
    current = null;
    clearTimeout(timer);
    if (job) settle(job, plainResult(job));
    pump();
  }

  /** KaTeX did not load within STARTUP_MS: this formula shows its source (not remembered), a new worker
   *  tries again for the next one. */
  function loadFailed(job) {
    if (current !== job) return;
    console.error('KaTeX did not load in the rich worker'); // i18n-ok: console only
    current = null;
    stopWorker();
    settle(job, plainResult(job));
    pump();
  }

  function answered(w, d) {
    if (w !== worker || !current || d?.id !== current.id) return;
    clearTimeout(timer);
    const job = current;
    current = null;
    if (job.kind === 'math') katexReady = true;
    let result;
    if (job.kind === 'code') {
      result = d.tree ? { kind: 'code', tree: d.tree, nodes: d.nodes | 0, language: String(d.language || '') } : { kind: 'code', tree: null };
    } else {
      result = d.tree && !d.error ? { kind: 'math', tree: d.tree, nodes: d.nodes | 0 } : { kind: 'math', error: true };
    }
    settle(job, result);
    pump();
  }

  /** Start the budget of `job`: a timer, which on a page that was itself busy past the due time waits
   *  LATE_MS more once (the worker's answer may be queued behind it). */
  function arm(job) {
    clearTimeout(timer);
    const due = performance.now() + budgetMs;
    let graced = false;
    const check = () => {
      if (current !== job) return;
      if (!graced && performance.now() - due > LATE_MS) {
        graced = true;
        timer = setTimeout(check, LATE_MS);
        return;
      }
      overrun(job);
    };
    timer = setTimeout(check, budgetMs);
  }

  /** The worker has loaded KaTeX and started `id`: its budget starts now. */
  function restart(w, id) {
    if (w !== worker) return;
    katexReady = true;
    if (current && current.id === id) arm(current);
  }

  function overrun(job) {
    if (current !== job) return;
    stats.overruns++;
    current = null;
    stopWorker();
    remember(job.hash);
    settle(job, plainResult(job));
    pump();
  }

  async function pump() {
    if (pumping) return;
    pumping = true;
    try {
      while (!current && queue.length) {
        const seen = await loadRefused();
        const job = queue.shift();
        if (!job) break; // closed meanwhile
        if (seen.has(job.hash)) {
          settle(job, plainResult(job));
          continue;
        }
        if (broken) {
          settle(job, plainResult(job));
          continue;
        }
        try {
          await startWorker();
        } catch (e) {
          console.error('highlighting and math stay plain:', e); // i18n-ok: console only
          broken = true;
          stopWorker();
          queue.unshift(job);
          continue;
        }
        current = job;
        stats.jobs++;
        worker.postMessage(job.msg);
        if (job.kind === 'math' && !katexReady) {
          // the worker loads KaTeX first and says `started`; loading it is no formula's time
          timer = setTimeout(() => loadFailed(job), startupMs);
        } else arm(job);
      }
    } finally {
      pumping = false;
    }
  }

  /** A result for `key`, or PENDING with a job queued for it (once) and `group` told when it settles. */
  function lookup(key, kind, msg, group) {
    const hit = results.get(key);
    if (hit) {
      store(key, hit);
      return hit;
    }
    let job = jobs.get(key);
    if (!job) {
      const id = nextId++;
      job = { id, key, kind, hash: contentHash(key), msg: { ...msg, id, kind }, groups: new Set() };
      jobs.set(key, job);
      queue.push(job);
      pump();
    }
    group.wait(job);
    return PENDING;
  }

  /** The result's nodes in `doc`, built from its plain tree once (null when the policy refuses it); its
   *  `nodes` become the count built here, whatever the worker said. Hooks hand out clones of it. */
  function templateOf(result, doc, policy) {
    if (result.templateDoc !== doc) {
      const count = {};
      result.templateDoc = doc;
      result.template = fromPlain(result.tree, doc, policy, count);
      result.nodes = count.nodes || 0;
    }
    return result.template;
  }

  /** The jobs one render waits for, and when to tell it: see hooks(). */
  function makeGroup(onSettled) {
    const waiting = new Set();
    const jobsOf = new Set();
    let fired = false;
    let changed = false;
    let progress = 0;
    const fire = () => {
      if (fired) return;
      fired = true;
      clearTimeout(progress);
      for (const job of jobsOf) job.groups.delete(g);
      if (typeof onSettled === 'function') {
        try {
          onSettled({ changed, done: waiting.size === 0 });
        } catch (e) {
          console.error('rendering a reply again failed', e); // i18n-ok: console only
        }
      }
    };
    const g = {
      wait(job) {
        if (fired) return;
        waiting.add(job.key);
        jobsOf.add(job);
        job.groups.add(g);
      },
      settled(key, visible) {
        if (fired) return;
        waiting.delete(key);
        changed ||= visible;
        if (waiting.size === 0) fire();
        else if (changed) progress ||= setTimeout(fire, PROGRESS_MS);
      },
    };
    return g;
  }

  /**
   * renderMarkdown's hooks for one render of one reply (the per-reply caps count within it).
   * @param {(info: {changed: boolean, done: boolean}) => void} [onSettled] called once: when every job
   *   this render waits for has answered (`done`), or PROGRESS_MS after the first answer that changes what
   *   it shows while others still run. `changed: false` (then `done` too): every answer left its block
   *   plain, so rendering again would draw the same nodes — the page may just drop the `data-md-pending`
   *   marks (a huge plain block is not laid out twice).
   */
  function hooks(onSettled) {
    if (!makeWorker) return {};
    const group = makeGroup(onSettled);
    let codeChars = 0;
    let blocks = 0;
    let formulas = 0;
    let mathNodes = 0;
    return {
      highlight(code, lang, doc) {
        if (typeof code !== 'string' || !code || code.length > HIGHLIGHT_MAX) return null;
        codeChars += code.length;
        if (codeChars > HIGHLIGHT_REPLY_MAX || ++blocks > HIGHLIGHT_REPLY_BLOCKS) return null;
        const name = typeof lang === 'string' ? lang : '';
        const r = lookup(`c${name}\u0000${code}`, 'code', { code, lang: name }, group);
        if (r === PENDING || !r.tree) return r === PENDING ? PENDING : null;
        const template = templateOf(r, doc, CODE_POLICY);
        return template ? { nodes: template.cloneNode(true), language: r.language } : null;
      },
      math(tex, display, doc = globalThis.document) {
        formulas++;
        if (typeof tex !== 'string' || tex.length > MATH_MAX || formulas > MATH_REPLY_MAX) throw new Error('formula over the limits'); // i18n-ok: caught by markdown.js, which shows the source
        const r = lookup(`${display ? 'D' : 'I'}${tex}`, 'math', { tex, display: !!display }, group);
        if (r === PENDING) return PENDING;
        const template = r.error || !r.tree ? null : templateOf(r, doc, MATH_POLICY);
        if (!template) throw new Error('formula refused'); // i18n-ok: caught by markdown.js, which shows the source
        if (mathNodes + r.nodes > MATH_REPLY_NODES) throw new Error('the reply has too much math'); // i18n-ok: caught by markdown.js, which shows the source
        mathNodes += r.nodes;
        return template.cloneNode(true);
      },
    };
  }

  return {
    hooks,
    stats,
    /** Stop the worker and forget queued jobs (tests). */
    close() {
      clearTimeout(timer);
      queue.length = 0;
      current = null;
      stopWorker();
      broken = true;
    },
  };
}

let shared = null;

/**
 * The hooks renderMarkdown takes for one render of one reply: `{highlight, math}` (none where the page
 * cannot start a Worker). `onSettled({changed, done})` is called when work this render waits for has
 * answered (see createRich's hooks()).
 * @param {(info: {changed: boolean, done: boolean}) => void} [onSettled]
 */
export function richHooks(onSettled) {
  shared ??= createRich();
  return shared.hooks(onSettled);
}
