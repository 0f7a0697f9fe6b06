// The rich worker: a module Worker (started by lib/rich.js from the extension's own URL, CSP
// `script-src 'self'`) that runs highlight.js (lib/highlight.js) and KaTeX (lib/math.js) off the panel's
// thread. One job at a time, each answered with a plain tree (lib/plain-tree.js) the page builds again
// through its allow-lists. The page times every job and terminates this worker when one overruns its
// budget (RICH_BUDGET_MS): nothing here has to be interruptible.
//
// Messages: the worker says `{type: 'ready'}` once its modules have loaded. The page sends
//   {id, kind: 'code', code, lang}  → {id, tree: plain | null, nodes, language}   (null: stays plain)
//   {id, kind: 'math', tex, display} → {id, tree: plain, nodes} | {id, error: 'refused'}
// The first formula loads KaTeX first (lib/math.js loadKatex); then the worker says
// `{type: 'started', id}` and the page starts that job's budget (it waits up to STARTUP_MS for that).
// A job's answer carries no HTML: highlight.js's string goes through the strict converter (hljsToNodes)
// into the recording document here; KaTeX's toNode() writes into the same recording document (the
// worker's global `document`, which a worker otherwise lacks).

import { highlightCode } from './highlight.js';
import { loadKatex, renderMath } from './math.js';
import { recordingDocument, toPlain } from './plain-tree.js';
import { HIGHLIGHT_NODES_MAX, MATH_NODES_MAX } from './rich-limits.js';

const doc = recordingDocument();

function codeJob({ id, code, lang }) {
  const r = highlightCode(code, typeof lang === 'string' ? lang : '', doc);
  const out = r ? toPlain(r.nodes, HIGHLIGHT_NODES_MAX) : null;
  return out ? { id, tree: out.plain, nodes: out.nodes, language: r.language } : { id, tree: null, nodes: 0 };
}

let katexLoaded = false;

async function mathJob({ id, tex, display }, started) {
  if (!katexLoaded) {
    await loadKatex();
    katexLoaded = true;
    started?.(id); // loading KaTeX is not this formula's time: the page starts its budget now
  }
  const before = globalThis.document;
  globalThis.document = doc; // KaTeX's toNode() builds in the global document
  try {
    const out = toPlain(renderMath(tex, !!display), MATH_NODES_MAX);
    return out ? { id, tree: out.plain, nodes: out.nodes } : { id, error: 'refused' };
  } catch {
    return { id, error: 'refused' };
  } finally {
    if (before === undefined) delete globalThis.document;
    else globalThis.document = before;
  }
}

/**
 * One job from the page → its answer (never throws).
 * @param {any} job
 * @param {(id: any) => void} [started] told when the job starts after a module had to load first
 * @returns {Promise<object>}
 */
export async function handleJob(job, started) {
  const id = job?.id;
  try {
    if (job?.kind === 'code' && typeof job.code === 'string') return codeJob(job);
    if (job?.kind === 'math' && typeof job.tex === 'string') return await mathJob(job, started);
  } catch {
    // a library failing on one input: that block stays plain / that formula shows its source
  }
  return job?.kind === 'math' ? { id, error: 'refused' } : { id, tree: null, nodes: 0 };
}

// In a worker (not when a test imports this module): answer the page.
if (typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope) {
  const started = (id) => globalThis.postMessage({ type: 'started', id });
  globalThis.onmessage = async (e) => globalThis.postMessage(await handleJob(e.data, started));
  globalThis.postMessage({ type: 'ready' });
}
