// node --test extension/lib/rich.test.js
// Highlighting and math off the page's thread (lib/rich.js + lib/rich-worker.js): the real worker module
// in a real thread (test-support/web-worker.js) with the real highlight.js and KaTeX, and scripted
// workers for the budget's edges. What is proved: a block renders plain at once and highlighted when the
// worker answers; a job that overruns its budget is cut (the worker terminated and replaced) and that
// block stays plain for good, also for a new page in the same browser session (chrome.storage.session);
// results are cached and a job is never started twice for the same (language, code) or formula, also
// while a streaming reply re-renders every frame; the per-block and per-reply caps.

import test from 'node:test';
import assert from 'node:assert/strict';

import { installFakeDom } from '../test-support/fake-dom.js';
import { ThreadWebWorker } from '../test-support/web-worker.js';
import { renderMarkdown } from './markdown.js';
import { memoryArea } from './platform.js';
import { contentHash, createRich, PENDING, PROGRESS_MS, REFUSED_KEY, REFUSED_MAX } from './rich.js';
import { handleJob } from './rich-worker.js';
import {
  HIGHLIGHT_MAX, HIGHLIGHT_REPLY_BLOCKS, HIGHLIGHT_REPLY_MAX, MATH_NODES_MAX, MATH_REPLY_MAX, MATH_REPLY_NODES, RICH_BUDGET_MS,
} from './rich-limits.js';

const WORKER_URL = new URL('./rich-worker.js', import.meta.url);
/** A block highlight.js takes tens of seconds on (issue 30: 53 s in the panel at 99,000 characters). */
const SLOW_JAVA = '_'.repeat(99_000);

function withDom(fn) {
  const dom = installFakeDom();
  return Promise.resolve()
    .then(() => fn(dom.document))
    .finally(() => dom.restore());
}

/** The real worker module in a thread, counting the threads made. */
function threads() {
  const made = [];
  return {
    made,
    makeWorker: () => {
      const w = new ThreadWebWorker(WORKER_URL);
      made.push(w);
      return w;
    },
  };
}

/** A scripted worker: says ready, then answers each job with `answer(job)` (undefined: never answers);
 *  like the real one it says `started` at its first formula (when it has loaded KaTeX). */
function scripted(answer) {
  const made = [];
  return {
    made,
    makeWorker: () => {
      let katex = false;
      const w = {
        posted: [],
        terminated: false,
        onmessage: null,
        postMessage(job) {
          w.posted.push(job);
          if (job.kind === 'math' && !katex) {
            katex = true;
            setTimeout(() => !w.terminated && w.onmessage?.({ data: { type: 'started', id: job.id } }), 0);
          }
          const a = answer(job);
          if (a !== undefined) setTimeout(() => !w.terminated && w.onmessage?.({ data: a }), 0);
        },
        terminate() {
          w.terminated = true;
        },
      };
      setTimeout(() => w.onmessage?.({ data: { type: 'ready' } }), 0);
      made.push(w);
      return w;
    },
  };
}

/** The elements under `root` (not `root` itself), in document order. */
const elements = (root) => {
  const out = [];
  const stack = [...root.childNodes].reverse();
  while (stack.length) {
    const n = stack.pop();
    if (n.nodeType === 1) out.push(n);
    for (let i = n.childNodes.length - 1; i >= 0; i--) stack.push(n.childNodes[i]);
  }
  return out;
};
const byClass = (root, cls) => elements(root).filter((e) => (e.getAttribute('class') ?? '').split(' ').includes(cls));
const pendingOf = (root) => elements(root).filter((e) => e.getAttribute('data-md-pending') !== null);
const hljsSpans = (root) => elements(root).filter((e) => /^hljs-/.test(e.getAttribute('class') ?? ''));

/** Render `text` with the rich hooks; resolves with the first render and one render per onSettled call
 *  until nothing is pending (or `rounds` renders). */
async function renderSettled(rich, doc, text, { rounds = 20 } = {}) {
  const frames = [];
  for (let i = 0; i < rounds; i++) {
    let settled;
    const told = new Promise((resolve) => (settled = resolve));
    const frag = renderMarkdown(text, doc, { throwOnError: true, ...rich.hooks(settled) });
    frames.push(frag);
    if (process.env.DEBUG_RICH) console.log('round', i, pendingOf(frag).length, rich.stats);
    if (pendingOf(frag).length === 0) return frames;
    await told;
  }
  throw new Error(`still pending after ${rounds} renders`);
}

const CODE = 'def area(r):\n    """Circle area."""\n    return 3.14159 * r ** 2  # <b>&</b>';

test('a code block renders plain (pending) at once and highlighted when the worker answers', () => withDom(async (doc) => {
  const w = threads();
  const area = memoryArea();
  const rich = createRich({ makeWorker: w.makeWorker, area, ensureCss: async () => {} });
  try {
    const frames = await renderSettled(rich, doc, 'Here:\n\n```python\n' + CODE + '\n```\n');
    const [first, last] = [frames[0], frames.at(-1)];
    const block0 = byClass(first, 'md-codeblock')[0];
    assert.equal(block0.getAttribute('data-md-pending'), '', 'the first render says pending');
    assert.equal(byClass(first, 'hljs').length, 0);
    assert.equal(elements(first).find((e) => e.localName === 'code').textContent, CODE, 'plain text at once');
    const code = elements(last).find((e) => e.localName === 'code');
    assert.equal(code.getAttribute('class'), 'language-python hljs');
    assert.equal(code.textContent, CODE);
    assert.deepEqual(hljsSpans(code).map((s) => s.textContent).slice(0, 2), ['def', 'area']);
    assert.equal(byClass(code, 'hljs-comment')[0].textContent, '# <b>&</b>');
    assert.equal(pendingOf(last).length, 0);
    assert.deepEqual(rich.stats, { workers: 1, jobs: 1, overruns: 0 });
    // cached: another render (and another reply with the same block) answers at once, no new job
    const again = renderMarkdown('```python\n' + CODE + '\n```', doc, { throwOnError: true, ...rich.hooks() });
    assert.ok(hljsSpans(again).length > 0);
    assert.equal(rich.stats.jobs, 1);
    // auto-detection runs in the worker too
    const auto = await renderSettled(rich, doc, '```\n{\n  "a": 1,\n  "b": [true, null]\n}\n```');
    assert.ok(byClass(auto.at(-1), 'hljs-attr').length > 0, 'JSON detected');
    assert.equal(rich.stats.jobs, 2);
    assert.equal(await area.get(REFUSED_KEY).then((v) => v[REFUSED_KEY]), undefined, 'nothing refused');
  } finally {
    rich.close();
  }
}));

test('math renders as KaTeX through the worker (MathML, CSSOM styles), the stylesheet first; errors show the source', () => withDom(async (doc) => {
  const w = threads();
  let css = 0;
  const rich = createRich({ makeWorker: w.makeWorker, area: memoryArea(), ensureCss: async () => { css++; } });
  try {
    const text = 'Euler $e^{i\\pi}+1=0$ and \\(\\vec{v}\\) and $\\fcolorbox{red}{blue}{x}$ and $\\frac{1}{$ and $\\href{javascript:alert(1)}{x}$.\n\n$$\n\\int_0^1 x\\,dx\n$$';
    const frames = await renderSettled(rich, doc, text);
    const first = frames[0];
    assert.equal(pendingOf(first).length, 6);
    assert.equal(byClass(first, 'md-math-src')[0].getAttribute('title'), null, 'pending: the source, untitled');
    const last = frames.at(-1);
    const katex = byClass(last, 'katex');
    assert.equal(katex.length, 5);
    for (const k of katex) assert.equal(elements(k).filter((e) => e.localName === 'math').length, 1);
    assert.equal(byClass(last, 'katex-display').length, 1);
    assert.ok(elements(last).some((e) => e.localName === 'svg'), 'the vector arrow is SVG');
    assert.ok(elements(last).some((e) => e.style.height), 'CSSOM styles carried over');
    assert.ok(elements(last).every((e) => e.localName !== 'a' && e.getAttribute('href') === null), 'no link from \\href');
    const src = byClass(last, 'md-math-src');
    assert.deepEqual(src.map((s) => s.textContent), ['$\\frac{1}{$']);
    assert.equal(src[0].getAttribute('title'), 'This formula could not be rendered; its TeX source is shown');
    assert.equal(css, 1, 'the stylesheet is added once, before the first formula shows');
    assert.equal(rich.stats.jobs, 6);
  } finally {
    rich.close();
  }
}));

test('the budget: a block highlight.js would take tens of seconds on is cut, its worker replaced, the block plain for good', { timeout: 60_000 }, () => withDom(async (doc) => {
  const w = threads();
  const area = memoryArea();
  const budgetMs = 800;
  const rich = createRich({ makeWorker: w.makeWorker, area, budgetMs, ensureCss: async () => {} });
  try {
    const reply = '```java\n' + SLOW_JAVA + '\n```\n\nthen\n\n```python\n' + CODE + '\n```';
    const t0 = Date.now();
    const frames = await renderSettled(rich, doc, reply);
    const ms = Date.now() - t0;
    const last = frames.at(-1);
    const [java, python] = elements(last).filter((e) => e.localName === 'code');
    assert.equal(java.textContent, SLOW_JAVA);
    assert.equal(elements(java).length, 0, 'the slow block stays plain');
    assert.equal(java.getAttribute('class'), 'language-java');
    assert.ok(hljsSpans(python).length > 0, 'the next block is highlighted by a new worker');
    assert.equal(rich.stats.overruns, 1);
    assert.equal(w.made.length, 2, 'the worker that overran was replaced');
    assert.ok(w.made[0].terminated, 'and terminated');
    assert.ok(ms < 30_000, `settled in ${ms} ms, not after highlight.js finished`);
    // remembered: re-renders answer at once, nothing is sent again
    const again = renderMarkdown(reply, doc, { throwOnError: true, ...rich.hooks() });
    assert.equal(pendingOf(again).length, 0);
    assert.equal(rich.stats.jobs, 2);
    const stored = (await area.get(REFUSED_KEY))[REFUSED_KEY];
    assert.deepEqual(stored, [contentHash(`cjava\u0000${SLOW_JAVA}`)]);
    // a new page in the same browser session (the panel opened again): no worker is even started for it
    const w2 = threads();
    const page2 = createRich({ makeWorker: w2.makeWorker, area, budgetMs, ensureCss: async () => {} });
    try {
      const frames2 = await renderSettled(page2, doc, '```java\n' + SLOW_JAVA + '\n```');
      assert.equal(hljsSpans(frames2.at(-1)).length, 0);
      assert.equal(pendingOf(frames2[0]).length, 1, 'pending only until the remembered hashes are read');
      assert.equal(w2.made.length, 0, 'no worker started on the re-opened page');
      assert.deepEqual(page2.stats, { workers: 0, jobs: 0, overruns: 0 });
    } finally {
      page2.close();
    }
  } finally {
    rich.close();
  }
}));

test('a job that never answers is cut at the budget; the worker is terminated and the next job gets a new one', () => withDom(async (doc) => {
  const w = scripted((job) => (job.code === 'loop forever' ? undefined : { id: job.id, tree: ['#fragment', 0, [], [], [['span', 0, ['class', 'hljs-keyword'], [], [job.code]]]], nodes: 3, language: 'python' }));
  const area = memoryArea();
  const budgetMs = 150;
  const rich = createRich({ makeWorker: w.makeWorker, area, budgetMs, ensureCss: async () => {} });
  try {
    const t0 = Date.now();
    const frames = await renderSettled(rich, doc, '```python\nloop forever\n```\n\n```python\nreturn\n```');
    const took = Date.now() - t0;
    const [stuck, next] = elements(frames.at(-1)).filter((e) => e.localName === 'code');
    assert.equal(elements(stuck).length, 0);
    assert.equal(stuck.textContent, 'loop forever');
    assert.equal(hljsSpans(next)[0].textContent, 'return');
    assert.equal(w.made.length, 2);
    assert.ok(w.made[0].terminated);
    assert.deepEqual(w.made[1].posted.map((j) => j.code), ['return']);
    assert.ok(took >= budgetMs, `${took} ms`);
    assert.equal(rich.stats.overruns, 1);
    // its late answer (if the worker ever said anything) is ignored: the worker is gone
    assert.equal((await area.get(REFUSED_KEY))[REFUSED_KEY].length, 1);
  } finally {
    rich.close();
  }
}));

test('loading KaTeX is not the first formula\'s time: the worker\'s "started" starts the budget again', () => withDom(async (doc) => {
  const budgetMs = 200;
  const made = [];
  const makeWorker = () => {
    const w = {
      posted: [],
      terminated: false,
      postMessage(job) {
        w.posted.push(job);
        // "loading" takes 1.5 budgets, then the job itself half of one
        setTimeout(() => !w.terminated && w.onmessage?.({ data: { type: 'started', id: job.id } }), budgetMs * 1.5);
        setTimeout(() => !w.terminated && w.onmessage?.({ data: { id: job.id, tree: ['span', 0, ['class', 'katex'], [], [job.tex]], nodes: 2 } }), budgetMs * 2);
      },
      terminate() {
        w.terminated = true;
      },
    };
    setTimeout(() => w.onmessage?.({ data: { type: 'ready' } }), 0);
    made.push(w);
    return w;
  };
  const rich = createRich({ makeWorker, area: memoryArea(), budgetMs, ensureCss: async () => {} });
  try {
    const frames = await renderSettled(rich, doc, '$x$');
    assert.deepEqual(byClass(frames.at(-1), 'katex').map((k) => k.textContent), ['x']);
    assert.equal(rich.stats.overruns, 0);
    assert.equal(made.length, 1);
  } finally {
    rich.close();
  }
}));

test('KaTeX that does not load within STARTUP_MS: that formula shows its source, not remembered; a new worker tries the next', () => withDom(async (doc) => {
  const made = [];
  const makeWorker = () => {
    const n = made.length;
    const w = {
      posted: [],
      terminated: false,
      postMessage(job) {
        w.posted.push(job);
        if (n === 0) return; // the first worker never gets KaTeX loaded
        setTimeout(() => w.onmessage?.({ data: { type: 'started', id: job.id } }), 0);
        setTimeout(() => w.onmessage?.({ data: { id: job.id, tree: ['span', 0, ['class', 'katex'], [], [job.tex]], nodes: 2 } }), 0);
      },
      terminate() {
        w.terminated = true;
      },
    };
    setTimeout(() => w.onmessage?.({ data: { type: 'ready' } }), 0);
    made.push(w);
    return w;
  };
  const area = memoryArea();
  const errors = [];
  const orig = console.error;
  console.error = (...a) => errors.push(a.join(' '));
  const rich = createRich({ makeWorker, area, budgetMs: 50, startupMs: 300, ensureCss: async () => {} });
  try {
    const frames = await renderSettled(rich, doc, '$a$ and $b$');
    const last = frames.at(-1);
    assert.deepEqual(byClass(last, 'md-math-src').map((s) => s.textContent), ['$a$']);
    assert.deepEqual(byClass(last, 'katex').map((s) => s.textContent), ['b']);
    assert.equal(made.length, 2);
    assert.ok(made[0].terminated);
    assert.equal(rich.stats.overruns, 0);
    assert.equal((await area.get(REFUSED_KEY))[REFUSED_KEY], undefined, 'not remembered');
    assert.ok(errors.some((e) => /KaTeX did not load/.test(e)));
  } finally {
    console.error = orig;
    rich.close();
  }
}));

test('a budget timer that fires late (the page itself was busy) waits once more for an answer queued behind it', () => withDom(async (doc) => {
  const budgetMs = 100;
  const w = scripted((job) => ({ id: job.id, tree: ['#fragment', 0, [], [], [['span', 0, ['class', 'hljs-x'], [], [job.code]]]], nodes: 3, language: 'x' }));
  const make = () => {
    const x = w.makeWorker();
    const post = x.postMessage.bind(x);
    x.postMessage = (job) => {
      x.posted.push(job);
      setTimeout(() => !x.terminated && x.onmessage?.({ data: { id: job.id, tree: ['#fragment', 0, [], [], [['span', 0, ['class', 'hljs-x'], [], [job.code]]]], nodes: 3, language: 'x' } }), budgetMs + 20);
    };
    void post;
    return x;
  };
  const rich = createRich({ makeWorker: make, area: memoryArea(), budgetMs, ensureCss: async () => {} });
  try {
    let settled;
    const told = new Promise((r) => (settled = r));
    renderMarkdown('```x\nbusy\n```', doc, { ...rich.hooks(settled) });
    await new Promise((r) => setTimeout(r, 10)); // the job is posted
    const until = Date.now() + budgetMs * 3;
    while (Date.now() < until); // the page's own thread is busy past the due time
    await told;
    const again = renderMarkdown('```x\nbusy\n```', doc, { ...rich.hooks() });
    assert.equal(hljsSpans(again).length, 1, 'the answer was taken');
    assert.equal(rich.stats.overruns, 0);
  } finally {
    rich.close();
  }
}));

test('a formula that never answers is cut at the budget too and shows its source, titled', () => withDom(async (doc) => {
  const w = scripted((job) => (job.tex === 'slow' ? undefined : { id: job.id, tree: ['span', 0, ['class', 'katex'], [], [job.tex]], nodes: 2 }));
  const rich = createRich({ makeWorker: w.makeWorker, area: memoryArea(), budgetMs: 100, ensureCss: async () => {} });
  try {
    const frames = await renderSettled(rich, doc, '$slow$ and $fast$');
    const last = frames.at(-1);
    assert.deepEqual(byClass(last, 'md-math-src').map((s) => [s.textContent, !!s.getAttribute('title')]), [['$slow$', true]]);
    assert.deepEqual(byClass(last, 'katex').map((s) => s.textContent), ['fast']);
    assert.equal(rich.stats.overruns, 1);
  } finally {
    rich.close();
  }
}));

test('streaming: every prefix re-rendered (one per frame) sends each closed block and formula once', () => withDom(async (doc) => {
  const w = scripted((job) => (job.kind === 'code'
    ? { id: job.id, tree: ['#fragment', 0, [], [], [['span', 0, ['class', 'hljs-string'], [], [job.code]]]], nodes: 3, language: 'js' }
    : { id: job.id, tree: ['span', 0, ['class', 'katex'], [], [job.tex]], nodes: 2 }));
  const rich = createRich({ makeWorker: w.makeWorker, area: memoryArea(), ensureCss: async () => {} });
  try {
    const msg = 'A:\n\n```js\nlet a = 1;\n```\n\nso $x^2$ and\n\n```js\nlet b = 2;\n```\n\n$$\ny\n$$\n\nend';
    let settledCalls = 0;
    for (let i = 1; i <= msg.length; i++) {
      renderMarkdown(msg.slice(0, i), doc, { throwOnError: true, ...rich.hooks(() => settledCalls++) });
      if (i % 7 === 0) await new Promise((r) => setTimeout(r, 0)); // some frames see answers
    }
    const final = await renderSettled(rich, doc, msg);
    const posted = w.made.flatMap((x) => x.posted).map((j) => j.code ?? j.tex);
    assert.deepEqual(posted.sort(), ['let a = 1;', 'let b = 2;', 'x^2', 'y'].sort(), 'closed blocks and formulas once each');
    assert.equal(hljsSpans(final.at(-1)).length, 2);
    assert.equal(byClass(final.at(-1), 'katex').length, 2);
    assert.ok(settledCalls > 0);
  } finally {
    rich.close();
  }
}));

test('a render waiting on several jobs is told once: PROGRESS_MS after a first visible answer, or when all have answered', () => withDom(async (doc) => {
  const slowMs = PROGRESS_MS * 2;
  const w = scripted((job) => ({ id: job.id, tree: ['#fragment', 0, [], [], [['span', 0, ['class', 'hljs-x'], [], [job.code]]]], nodes: 3, language: 'x' }));
  const make = w.makeWorker;
  // delay every answer by slowMs
  const slow = () => {
    const x = make();
    const post = x.postMessage.bind(x);
    x.postMessage = (job) => setTimeout(() => post(job), slowMs);
    return x;
  };
  const rich = createRich({ makeWorker: slow, area: memoryArea(), budgetMs: 10_000, ensureCss: async () => {} });
  try {
    const t0 = Date.now();
    const told = [];
    const done = new Promise((resolve) => {
      renderMarkdown('```a\n1\n```\n```a\n2\n```\n```a\n3\n```', doc, { ...rich.hooks((info) => { told.push(info); resolve(Date.now() - t0); }) });
    });
    const ms = await done;
    await new Promise((r) => setTimeout(r, slowMs * 3));
    assert.deepEqual(told, [{ changed: true, done: false }], 'told once, with some still running');
    assert.ok(ms < slowMs * 3, `told after ${ms} ms, before all three answered`);
  } finally {
    rich.close();
  }
}));

test('answers that all leave their blocks plain say so (changed: false): the page only drops the pending marks', () => withDom(async (doc) => {
  const w = scripted((job) => ({ id: job.id, tree: null, nodes: 0 }));
  const rich = createRich({ makeWorker: w.makeWorker, area: memoryArea(), ensureCss: async () => {} });
  try {
    const told = await new Promise((resolve) => {
      renderMarkdown('```a\n1\n```\n```a\n2\n```', doc, { ...rich.hooks(resolve) });
    });
    assert.deepEqual(told, { changed: false, done: true });
  } finally {
    rich.close();
  }
}));

test('caps: a block over HIGHLIGHT_MAX, and the code past HIGHLIGHT_REPLY_MAX or HIGHLIGHT_REPLY_BLOCKS in a reply, are not sent', () => withDom(async (doc) => {
  const w = scripted((job) => ({ id: job.id, tree: ['#fragment', 0, [], [], [['span', 0, ['class', 'hljs-x'], [], [job.code]]]], nodes: 3, language: 'x' }));
  const rich = createRich({ makeWorker: w.makeWorker, area: memoryArea(), ensureCss: async () => {} });
  try {
    const huge = 'h'.repeat(HIGHLIGHT_MAX + 1);
    const hooks = rich.hooks();
    assert.equal(hooks.highlight(huge, 'x', doc), null, 'over the per-block cap: plain, no job');
    const part = Math.floor(HIGHLIGHT_REPLY_MAX / 2) - 10;
    const a = 'a'.repeat(part);
    const b = 'b'.repeat(part);
    const c = 'c'.repeat(100);
    const reply = ['```x', huge, '```', '```x', a, '```', '```x', b, '```', '```x', c, '```'].join('\n');
    const frames = await renderSettled(rich, doc, reply);
    const codes = elements(frames.at(-1)).filter((e) => e.localName === 'code');
    assert.deepEqual(codes.map((e) => hljsSpans(e).length), [0, 1, 1, 0], 'the block past the reply cap stays plain');
    assert.deepEqual(w.made.flatMap((x) => x.posted).map((j) => j.code.length), [part, part]);
    // and at most HIGHLIGHT_REPLY_BLOCKS blocks per reply
    const many = Array.from({ length: HIGHLIGHT_REPLY_BLOCKS + 2 }, (_, i) => '```x\nb' + i + '\n```').join('\n');
    const manyFrames = await renderSettled(rich, doc, many, { rounds: 50 });
    const lit = elements(manyFrames.at(-1)).filter((e) => e.localName === 'code').map((c) => hljsSpans(c).length);
    assert.deepEqual(lit.slice(-3), [1, 0, 0]);
    assert.equal(lit.filter(Boolean).length, HIGHLIGHT_REPLY_BLOCKS);
    // the same block alone in another reply is within that reply's cap
    const alone = await renderSettled(rich, doc, '```x\n' + c + '\n```');
    assert.equal(hljsSpans(alone.at(-1)).length, 1);
  } finally {
    rich.close();
  }
}));

test('caps: formulas past MATH_REPLY_MAX, or past MATH_REPLY_NODES nodes, show their source', () => withDom(async (doc) => {
  // a big formula's tree has just over half the reply's nodes (the worker's own count says 0: the page counts)
  const bigKids = Math.floor(MATH_REPLY_NODES / 2) + 1;
  assert.ok(bigKids + 1 <= MATH_NODES_MAX);
  const w = scripted((job) => ({
    id: job.id,
    tree: ['span', 0, ['class', 'katex'], [], job.tex.startsWith('big') ? Array.from({ length: bigKids }, () => 'x') : [job.tex]],
    nodes: 0,
  }));
  const rich = createRich({ makeWorker: w.makeWorker, area: memoryArea(), ensureCss: async () => {} });
  try {
    const many = Array.from({ length: MATH_REPLY_MAX + 5 }, (_, i) => `$x_{${i}}$`).join(' ');
    const frames = await renderSettled(rich, doc, many, { rounds: 50 });
    const last = frames.at(-1);
    assert.equal(byClass(last, 'katex').length, MATH_REPLY_MAX);
    assert.equal(byClass(last, 'md-math-src').length, 5);
    assert.equal(w.made.flatMap((x) => x.posted).length, MATH_REPLY_MAX, 'the formulas past the cap are not sent');
    const big = await renderSettled(rich, doc, '$big1$ $big2$ $small$');
    assert.deepEqual(byClass(big.at(-1), 'katex').map((k) => k.textContent.length), [bigKids, 'small'.length]);
    assert.deepEqual(byClass(big.at(-1), 'md-math-src').map((k) => k.textContent), ['$big2$']);
  } finally {
    rich.close();
  }
}));

test('what the worker answers is built only through the allow-lists: a hostile answer leaves the block plain', () => withDom(async (doc) => {
  const answers = {
    link: ['#fragment', 0, [], [], [['a', 0, ['href', 'javascript:alert(1)'], [], ['link']]]],
    handler: ['#fragment', 0, [], [], [['span', 0, ['class', 'x', 'onclick', 'alert(1)'], [], ['handler']]]],
    style: ['#fragment', 0, [], [], [['span', 0, ['class', 'x'], ['backgroundImage', 'url(https://evil.example/)'], ['style']]]],
    other: ['#fragment', 0, [], [], [['span', 0, ['class', 'x'], [], ['not the code']]]],
  };
  const w = scripted((job) => ({ id: job.id, tree: answers[job.code], nodes: 3, language: 'x' }));
  const rich = createRich({ makeWorker: w.makeWorker, area: memoryArea(), ensureCss: async () => {} });
  try {
    const frames = await renderSettled(rich, doc, Object.keys(answers).map((k) => '```x\n' + k + '\n```').join('\n'));
    const codes = elements(frames.at(-1)).filter((e) => e.localName === 'code');
    assert.deepEqual(codes.map((c) => [c.textContent, elements(c).length]), Object.keys(answers).map((k) => [k, 0]));
  } finally {
    rich.close();
  }
}));

test('a worker that cannot start leaves replies plain, nothing pending', () => withDom(async (doc) => {
  for (const makeWorker of [
    () => { throw new Error('no workers here'); },
    () => { const w = { postMessage() {}, terminate() {} }; setTimeout(() => w.onerror?.({ message: 'load error' }), 0); return w; },
  ]) {
    const rich = createRich({ makeWorker, area: memoryArea(), ensureCss: async () => {} });
    const errors = [];
    const orig = console.error;
    console.error = (...a) => errors.push(a.join(' '));
    try {
      const frames = await renderSettled(rich, doc, '```python\nx = 1\n```\n\n$x$');
      assert.equal(hljsSpans(frames.at(-1)).length, 0);
      assert.equal(byClass(frames.at(-1), 'md-math-src').length, 1);
      assert.ok(errors.some((e) => /stay plain/.test(e)), errors.join('\n'));
    } finally {
      console.error = orig;
      rich.close();
    }
  }
  // no Worker at all: no hooks, markdown.js renders plain
  assert.deepEqual(createRich({ makeWorker: null, area: memoryArea() }).hooks(), {});
}));

test('remembered overruns are capped at REFUSED_MAX, the oldest forgotten first', () => withDom(async (doc) => {
  const area = memoryArea();
  const w = scripted(() => undefined);
  const rich = createRich({ makeWorker: w.makeWorker, area, budgetMs: 1, ensureCss: async () => {} });
  try {
    const blocks = (from, to) => Array.from({ length: to - from }, (_, i) => '```x\nblock ' + (from + i) + '\n```').join('\n');
    const half = Math.ceil((REFUSED_MAX + 3) / 2);
    await renderSettled(rich, doc, blocks(0, half), { rounds: 400 });
    await renderSettled(rich, doc, blocks(half, REFUSED_MAX + 3), { rounds: 400 });
    const stored = (await area.get(REFUSED_KEY))[REFUSED_KEY];
    assert.equal(stored.length, REFUSED_MAX);
    assert.ok(!stored.includes(contentHash('cx\u0000block 0')));
    assert.ok(stored.includes(contentHash(`cx\u0000block ${REFUSED_MAX + 2}`)));
  } finally {
    rich.close();
  }
}));

test('the worker module answers jobs directly: plain trees, no HTML; oversize or failing input stays plain', async () => {
  const code = await handleJob({ id: 1, kind: 'code', code: 'x = "<b>"', lang: 'python' });
  assert.equal(code.id, 1);
  assert.equal(code.language, 'python');
  assert.ok(!JSON.stringify(code.tree).includes('<b>"</span>'), 'no HTML string in the answer');
  assert.deepEqual(await handleJob({ id: 2, kind: 'code', code: 'x'.repeat(HIGHLIGHT_MAX + 1), lang: 'python' }), { id: 2, tree: null, nodes: 0 });
  assert.deepEqual(await handleJob({ id: 3, kind: 'math', tex: '\\frac{1}{', display: false }), { id: 3, error: 'refused' });
  assert.deepEqual(await handleJob({ id: 4, kind: 'nope' }), { id: 4, tree: null, nodes: 0 });
  const math = await handleJob({ id: 5, kind: 'math', tex: 'x^2', display: true });
  assert.equal(math.tree[0], 'span');
  assert.equal(typeof globalThis.document, 'undefined', 'the recording document is not left global');
  assert.ok(RICH_BUDGET_MS >= 1000, 'the budget leaves room for ordinary 100,000-character blocks on a busy machine');
  assert.equal(PENDING.pending, true);
});
