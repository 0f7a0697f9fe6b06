// Auto-summary (storage-model §9 "Auto-summary", §7.4): an attached page longer than the threshold
// is condensed by the chat's own provider: the host plans the chunks (`attach.summaryPlan`), each
// chunk is summarized (at most SUMMARY_CONCURRENCY calls at once), N summaries are merged by one
// more call, and the host applies the result (`attach.applySummary`).

import { bodyFieldsFor, isBlank } from './provider.js';
import { codeError } from './errors.js';
import { t } from '../lib/i18n.js';

const SUMMARY_MAX_TOKENS = 4096;
/** At most this many summary calls run at once (N chunks are still all requested in parallel waves). */
export const SUMMARY_CONCURRENCY = 6;

// the summary prompts are words to the model, not to the reader: English whatever the UI language
// (the summary itself is asked for in the language of the source)
const FAMILY_RULES = {
  video:
    'The source is a video transcript. Keep every [mm:ss] or [h:mm:ss] timestamp marker exactly as written, ' + // i18n-ok: prompt to the model
    'next to the point it belongs to, in chronological order.', // i18n-ok: prompt to the model
  paper:
    'The source is a paper or long document. Keep its section headings, every number, figure and table ' + // i18n-ok: prompt to the model
    'reference, and every [Page N] marker exactly as written.', // i18n-ok: prompt to the model
  generic: 'Keep headings, names, numbers, dates, definitions, code identifiers and conclusions.', // i18n-ok: prompt to the model
};

function summaryPrompts(family) {
  const rule = FAMILY_RULES[family] ?? FAMILY_RULES.generic;
  return {
    chunk:
      'You condense attached page content so a later conversation can use it. Write a faithful, dense ' + // i18n-ok: prompt to the model
      'Markdown summary in the language of the source; no preamble, no commentary. ' + // i18n-ok: prompt to the model
      rule,
    merge:
      'You are given summaries of consecutive segments of one source, each marked [Segment i]. Merge them ' + // i18n-ok: prompt to the model
      'into one coherent, faithful Markdown summary in the language of the source, removing repetition but ' + // i18n-ok: prompt to the model
      'no facts; no preamble and no segment markers. ' + // i18n-ok: prompt to the model
      rule,
  };
}

/** The per-chunk user messages: one chunk → as is; N chunks → `[Segment i/N]\n<chunk>`. */
function summaryChunkMessages(chunks) {
  if (chunks.length === 1) return [chunks[0]];
  return chunks.map((c, i) => `[Segment ${i + 1}/${chunks.length}]\n${c}`);
}

/** The merge call's user message: summaries prefixed `[Segment i]\n`, joined by blank lines. */
function summaryMergeMessage(summaries) {
  return summaries.map((s, i) => `[Segment ${i + 1}]\n${s}`).join('\n\n');
}

/** A one-message request body in the provider's shape (no history). */
function simpleBody(provider, system, user, { maxTokens = SUMMARY_MAX_TOKENS } = {}) {
  const fields = bodyFieldsFor(provider, { maxTokens });
  switch (provider.kind) {
    case 'anthropic':
      return { ...fields, system, messages: [{ role: 'user', content: user }] };
    case 'responses':
      return { ...fields, instructions: system, input: [{ role: 'user', content: user }] };
    default:
      return {
        ...fields,
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: user },
        ],
      };
  }
}

/** Run `fn` over `items` with at most `limit` calls in flight; results in order; first failure rejects. */
async function mapLimit(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  let failed = null;
  const worker = async () => {
    while (failed === null && next < items.length) {
      const i = next++;
      try {
        out[i] = await fn(items[i], i);
      } catch (e) {
        failed ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (failed !== null) throw failed;
  return out;
}

/**
 * `summarize(attachId, provider)` → whether the host applied a summary. Progress goes out as
 * `{stage: 'summary', attachId, done, total, note?}`; the work keeps the worker alive and is
 * tracked like a turn (`activity`).
 * @param {object} deps
 * @param {object} deps.storage
 * @param {{streamReply: Function}} deps.llm
 * @param {Function} [deps.fetchImpl]   passed through to llm.streamReply
 * @param {number} [deps.concurrency]
 * @param {(event: object) => void} deps.progress   a chat.progress event
 * @param {{start: Function, end: Function, track: (p: Promise) => Promise}} deps.activity
 */
export function createSummarizer({ storage, llm, fetchImpl, concurrency = SUMMARY_CONCURRENCY, progress, activity }) {
  async function summarize(attachId, provider) {
    activity.start();
    const work = (async () => {
      const plan = await storage.attach.summaryPlan({ attachId });
      const chunks = Array.isArray(plan?.chunks) ? plan.chunks : [];
      if (!plan?.needed || chunks.length === 0) return false;
      const prompts = summaryPrompts(plan.family);
      const total = chunks.length > 1 ? chunks.length + 1 : 1;
      let done = 0;
      const controller = new AbortController();
      progress({ stage: 'summary', attachId, done, total });
      const one = async (system, user) => {
        const r = await llm.streamReply({
          provider,
          body: simpleBody(provider, system, user),
          signal: controller.signal,
          onDelta: () => {},
          onEvent: () => {},
          ...(fetchImpl ? { fetchImpl } : {}),
        });
        if (isBlank(r?.text)) throw codeError('empty_summary', t('summaryEmpty'));
        done++;
        progress({ stage: 'summary', attachId, done, total });
        return r.text.trim();
      };
      const messages = summaryChunkMessages(chunks);
      let summary;
      try {
        if (messages.length === 1) summary = await one(prompts.chunk, messages[0]);
        else {
          const parts = await mapLimit(messages, concurrency, (m) => one(prompts.chunk, m));
          summary = await one(prompts.merge, summaryMergeMessage(parts));
        }
      } catch (e) {
        controller.abort();
        progress({ stage: 'summary', attachId, done, total, note: 'failed' });
        throw e;
      }
      const applied = await storage.attach.applySummary({ attachId, summary });
      return applied?.applied === true;
    })();
    try {
      return await activity.track(work);
    } finally {
      activity.end();
    }
  }

  return summarize;
}
