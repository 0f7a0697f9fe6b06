// T24 (reliability.md §10): end to end in headless Chromium. A temp profile with the host
// manifest (`keepsake-host install --user-data-dir`), the mock LLM, and 100 messages typed into the
// real side panel and sent with its Send button, with 5 explicit service-worker restarts (CDP
// ServiceWorker.stopAllWorkers) spread over the run and one side-panel reload.
//
// Figures:
// - round trips ok: the panel showed the reply to every message (finished assistant bubble right
//   after its user bubble);
// - duplicates: the chat is kept in its session from the first message (docs/keeps.md auto-keep),
//   so entries the live window (60 entries) no longer shows stay in the session ahead of it (the
//   kept prefix) and the session body is the whole conversation, with no Save step; in that body
//   every user message must appear exactly once, in order, each followed by exactly one assistant
//   entry with its reply (also checked in SQL on `session_entries`, and against the at-most-once
//   log `client_requests`);
// - host processes spawned: distinct pids of the host's "keepsake-host serving" log lines (one per
//   process start), cross-checked with the pids seen under the browser process;
// - history after reload: the reloaded panel's bubbles (role, index, text) equal the live history
//   in the SQLite file, row for row.
//
// Sizes: CI 100 messages; KEEPSAKE_LONG=1 500; KEEPSAKE_T24_MESSAGES=<n> overrides.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withKeepsake, waitFor } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, bubbles, waitForBubbles, openDrawer, closeDrawer, addProvider, sendAndAwaitReply } from './panel.mjs';
import { live, sessions, sessionBody, activeSessionId, boundConversation, clientRequestCounts, trimmed } from './db.mjs';

const N = Number(process.env.KEEPSAKE_T24_MESSAGES || (process.env.KEEPSAKE_LONG === '1' ? 500 : 100));
const RESTARTS = 5;
const WORDS = ['amber', 'birch', 'cedar', 'delta', 'ember', 'fjord', 'grove', 'heath', 'inlet', 'juniper'];

const pad = (i) => String(i).padStart(3, '0');
const question = (i) => `T24 message ${pad(i)} about the ${WORDS[i % WORDS.length]}`;
const answer = (i) => `Reply ${pad(i)}: noted, ${WORDS[(i * 7) % WORDS.length]}.`;

/** Before which messages the worker is stopped: 5 points spread over the run. */
const restartBefore = new Set(Array.from({ length: RESTARTS }, (_, j) => Math.round(((j + 1) * N) / (RESTARTS + 1)) + 1));
/** After which message the panel is reloaded (once the live history is being trimmed). */
const RELOAD_AFTER = Math.max(2, Math.round(N * 0.7) + 2);

function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

/** The panel's bubbles against the live history in the file: [] when identical, else the differences. */
function compareWithDb(k, shown) {
  const rows = live(k);
  const want = rows.map((r) => ({ role: r.role, index: r.position, text: (r.text ?? '').trim() }));
  const got = shown.map((b) => ({ role: b.role, index: b.index, text: b.text }));
  const diffs = [];
  if (got.length !== want.length) diffs.push(`panel shows ${got.length} bubbles, the DB has ${want.length} entries`);
  for (let i = 0; i < Math.max(got.length, want.length); i++) {
    if (JSON.stringify(got[i]) !== JSON.stringify(want[i])) diffs.push(`#${i}: panel ${JSON.stringify(got[i])} db ${JSON.stringify(want[i])}`);
    if (diffs.length > 5) break;
  }
  return diffs;
}

/** Count duplicates in a conversation `[{role, text}]` that should be q1, a1, q2, a2, … qN, aN. */
function audit(conv) {
  const seen = new Map();
  let duplicates = 0;
  let unanswered = 0;
  let misplaced = 0;
  for (let i = 0; i < conv.length; i++) {
    const e = conv[i];
    if (e.role !== 'user') continue;
    seen.set(e.text, (seen.get(e.text) ?? 0) + 1);
    let replies = 0;
    for (let j = i + 1; j < conv.length && conv[j].role === 'assistant'; j++) replies++;
    if (replies === 0) unanswered++;
    duplicates += Math.max(0, replies - 1);
  }
  for (const n of seen.values()) duplicates += n - 1;
  const missing = [];
  for (let i = 1; i <= N; i++) if (!seen.has(question(i))) missing.push(i);
  const expected = [];
  for (let i = 1; i <= N; i++) expected.push({ role: 'user', text: question(i) }, { role: 'assistant', text: answer(i) });
  for (let i = 0; i < Math.max(expected.length, conv.length); i++) {
    if (JSON.stringify(expected[i]) !== JSON.stringify(conv[i])) misplaced++;
  }
  return { duplicates, unanswered, missing, misplaced, length: conv.length };
}

test(`T24: ${N} messages through the panel, ${RESTARTS} worker restarts, a panel reload`, { timeout: 900_000 }, async (t) => {
  const started = Date.now();
  const mock = await startMockLlm({
    script: (req) => {
      const m = /T24 message (\d+)/.exec(req.lastUserText);
      return { text: m ? answer(Number(m[1])) : 'unexpected request', chunkSize: 12 };
    },
  });
  const note = (s) => t.diagnostic(`${((Date.now() - started) / 1000).toFixed(1)} s ${s}`);
  try {
    await withKeepsake(t, {}, async (k) => {
      // ---- provider through the options page, once
      const opt = await k.openOptions();
      await addProvider(opt, { name: 'Mock chat', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: 'sk-t24', model: 'mock-model' });
      await opt.close();

      let panel = await k.openPanel();
      const latencies = [];
      const failures = [];
      const pidsSeen = new Set();
      let maxAlive = 0;
      let restarts = 0;
      let restartsConfirmed = 0;
      let pendingFreshCheck = false;
      let reload = null;
      let sid = null;
      const sample = () => {
        const pids = k.hostPids();
        for (const p of pids) pidsSeen.add(p);
        maxAlive = Math.max(maxAlive, pids.length);
      };

      for (let i = 1; i <= N; i++) {
        if (restartBefore.has(i)) {
          const { statuses } = await k.stopWorker();
          assert.ok(statuses.includes('stopped'), `CDP statuses ${statuses}`);
          restarts++;
          pendingFreshCheck = true;
          note(`worker stopped before message ${i}`);
        }
        try {
          const { ms } = await sendAndAwaitReply(panel, question(i), answer(i), { timeoutMs: 30_000 });
          latencies.push(ms);
        } catch (e) {
          failures.push(`message ${i}: ${e.message}`);
          note(`message ${i} FAILED: ${e.message}`);
          if (failures.length >= 3) throw new Error(`3 round trips failed:\n${failures.join('\n')}`);
          // start the next message from a fresh panel
          await panel.reload();
          await panel.waitForSelector(`${tid('stop')}[hidden]`, { state: 'attached', timeout: 15_000 });
        }
        if (pendingFreshCheck) {
          pendingFreshCheck = false;
          if (await k.workerIsFresh()) restartsConfirmed++;
        }
        sample();

        if (i === 1) {
          // The first message made the chat a session of its own (auto-keep): nothing to save.
          sid = await waitFor(() => activeSessionId(k), { timeoutMs: 10_000, what: 'the live chat kept in its session' });
          await openDrawer(panel);
          await panel.locator(`${tid('session-row')}[data-id="${sid}"]`).waitFor({ timeout: 10_000 });
          await closeDrawer(panel);
        }

        if (i === RELOAD_AFTER) {
          await panel.reload();
          const want = live(k).length;
          const shown = await waitForBubbles(panel, (b) => b.length === want && b.every((x) => !x.streaming), {
            timeoutMs: 20_000,
            what: `${want} bubbles after the reload`,
          });
          const diffs = compareWithDb(k, shown);
          reload = { after: i, entries: want, diffs };
          note(`panel reloaded after message ${i}: ${want} entries, ${diffs.length} differences`);
        }
        if (i % 20 === 0) note(`${i} messages, p50 ${percentile(latencies, 50)} ms`);
      }

      // ---- the panel (never reloaded since) still shows exactly the DB
      const finalDiffs = compareWithDb(k, await bubbles(panel));

      // ---- the whole conversation: the kept prefix + the live window, all in the session
      const trimmedCount = trimmed(k).length;
      const bound = boundConversation(k);
      const saved = sessions(k);
      const body = sessionBody(k, sid).map((r) => ({ role: r.role, text: r.text ?? '' }));
      const a = audit(body);
      const sqlDupUsers = k.sql(
        `SELECT text, count(*) AS n FROM session_text WHERE session_id = '${sid}' AND role = 'user' GROUP BY text HAVING n > 1`,
      );
      const writes = clientRequestCounts(k);

      // ---- host processes: one "serving" log line per process start
      sample();
      const servedPids = new Set([...k.hostLog().matchAll(/keepsake-host serving.*?pid[=:]\s*(\d+)/g)].map((m) => Number(m[1])));
      const spawned = servedPids.size || pidsSeen.size;
      const alive = k.hostPids().length;

      const ok = latencies.length;
      const duplicates = a.duplicates + sqlDupUsers.length;
      const secs = ((Date.now() - started) / 1000).toFixed(1);
      console.log(
        `T24 detail: ${N} messages in ${secs} s, round trip p50 ${percentile(latencies, 50)} ms p95 ${percentile(latencies, 95)} ms ` +
          `max ${Math.max(...latencies)} ms; live ${live(k).length} entries, trimmed ${trimmedCount}, session body ${a.length} ` +
          `(misplaced ${a.misplaced}, unanswered ${a.unanswered}, missing ${a.missing.length}); history.append applied ` +
          `${writes['history.append'] ?? 0} and sessions.appendTo ${writes['sessions.appendTo'] ?? 0}; host pids from the log ${servedPids.size}, seen under the browser ${pidsSeen.size}, ` +
          `at most ${maxAlive} alive at once, ${alive} alive at the end; restarts confirmed by a new worker realm ${restartsConfirmed}; ` +
          `sessions ${saved.length}; chat requests to the mock ${mock.requests.filter((r) => r.kind === 'chat').length}`,
      );
      console.log(
        `T24: round trips ${ok}/${N}, duplicates ${duplicates}, host processes ${spawned}, worker restarts ${restarts}, ` +
          `reload ${reload && reload.diffs.length === 0 ? 'identical' : 'DIFFERENT'}; ${secs} s`,
      );

      assert.deepEqual(failures, [], 'every round trip completes');
      assert.equal(ok, N);
      assert.equal(restarts, RESTARTS);
      assert.equal(restartsConfirmed, RESTARTS, 'each stop gave a new worker realm');
      assert.ok(reload, 'the panel was reloaded');
      assert.deepEqual(reload.diffs, [], 'the reloaded panel shows exactly the DB');
      assert.deepEqual(finalDiffs, [], 'the panel shows exactly the DB at the end');
      assert.equal(duplicates, 0, 'no duplicate entries');
      assert.deepEqual(a.missing, [], 'every message is stored');
      assert.equal(a.unanswered, 0, 'every message has its reply stored');
      assert.equal(a.misplaced, 0, 'the saved conversation is q1, a1, … in order');
      assert.equal(a.length, 2 * N);
      assert.deepEqual(body, bound, 'the session holds the kept prefix and the live entries');
      assert.ok(trimmedCount > 0 || N <= 30, `the window moved on (${trimmedCount} entries ahead of it)`);
      assert.equal(saved.length, 1, 'one session: the chat, kept from its first message');
      // each message: its user entry appended once, its reply once (to the session the turn was
      // sent in: sessions.appendTo)
      assert.equal(writes['history.append'], N, 'history.append applied exactly once per message');
      assert.equal(writes['sessions.appendTo'], N, 'sessions.appendTo applied exactly once per reply');
      assert.equal(mock.requests.filter((r) => r.kind === 'chat').length, N, 'one LLM request per message');
      // each worker stop closes the port (the host exits on EOF) and the next message starts one:
      // 1 + 5 expected; far more would be a reconnect storm
      assert.ok(spawned >= 1 && spawned <= 2 * (1 + RESTARTS), `host processes spawned: ${spawned}`);
      assert.ok(alive <= 1, `${alive} host processes alive at the end`);
      assert.ok(maxAlive <= 2, `${maxAlive} host processes alive at once`);
    });
  } finally {
    await mock.close();
  }
});
