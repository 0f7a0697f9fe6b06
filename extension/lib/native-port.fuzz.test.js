// T23 (reliability.md §10): the extension's host client under random schedules.
//
// Each schedule drives one NativePort (fake ports, the injectable clock) through the storage
// client (`createStorage(port.request)`, so writes carry a clientRequestId and are retried once)
// with a seeded random interleaving of: reads and writes, host replies out of order, replies
// chunked at random code point boundaries in the host's real format (PROTOCOL.md §3), error
// replies, duplicate and unknown-id replies, `id: null` errors, `changed` events, frames on a dead
// port, invalid frames that Chrome drops (never answered → timeout), timeouts, disconnects with
// every browser error string, our own close(), connectNative throwing, a synchronous 64 MiB
// postMessage throw, reconnects with backoff, idle closes, resetBackoff(), open().
//
// Scheduling follows the event loop: a host frame, a disconnect and each timer are tasks of their
// own (every microtask drains before and after them; a fake timer fires alone, then the queue
// drains), while calls from the extension (request, close, open, resetBackoff) may come in one
// task, a few microtasks apart, or in separate tasks. (Firing timers back to back without draining
// lets close() run between a backoff wait's end and the connection attempt resuming, which no
// event loop allows; an earlier version of this test did, and flagged it.)
//
// Oracles, checked while the schedule runs (synchronously after each host frame, disconnect and
// clock step) and again at its end:
// - a complete reply on the live port settles exactly its own request, with exactly the value or
//   error the fake host meant to send (chunked or not); every other frame settles nothing;
// - a disconnect settles every waiting request with the code of its browser message and that
//   message; close() with `disconnected`; a timeout fires exactly at sent time + timeout, and
//   only then; nothing is left waiting on a dead port; at most one port is live;
// - every promise (storage call, port request, wire request, open()) settles before the schedule
//   ends, and no resolve/reject is ever called twice (a Promise subclass counts the calls);
// - each caller gets its own last attempt's outcome; a write failing with timeout / disconnected /
//   host_exited / host_io is retried exactly once with the same clientRequestId (on the wire too);
//   reads and other failures never are; reads never carry a clientRequestId;
// - after the schedule the port still works and nothing is left armed on the clock.
//
// Sizes: CI 1,000 schedules; KEEPSAKE_LONG=1 20,000; KEEPSAKE_T23_SCHEDULES=<n> overrides.
// Replay: KEEPSAKE_SEED=<seed printed> (and KEEPSAKE_T23_ONLY=<schedule index> for one schedule).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';

import { NativePort } from './native-port.js';
import { createStorage } from './storage.js';
import { HostError, PROTOCOL_VERSION } from './protocol.js';
import { FakeClock, FakeNativePort, flush } from '../test-support/fakes.js';
import {
  Prng,
  seedFromEnv,
  subSeed,
  runSize,
  randomText,
  cutAtCodePoints,
  chunkFrames,
  trackSettlements,
} from '../test-support/fuzz.js';

const SCHEDULES = runSize(1000, 20_000, 'KEEPSAKE_T23_SCHEDULES');
const ONLY = process.env.KEEPSAKE_T23_ONLY ? Number(process.env.KEEPSAKE_T23_ONLY) : null;
const SEED = seedFromEnv();

const HELLO = Object.freeze({ name: 'keepsake-host', version: '0.1.0', protocolVersion: PROTOCOL_VERSION, dbPath: '/tmp/k.db', dbError: null });

/** Every message Chrome gives in onDisconnect (platform.md §7), and the code the port must report. */
const DISCONNECTS = [
  ['Specified native messaging host not found.', 'host_not_found'],
  ['Native messaging host dev.keepsake.host is not registered.', 'host_not_found'],
  ['Access to the specified native messaging host is forbidden.', 'host_forbidden'],
  ['Native host has exited.', 'host_exited'],
  ['Failed to start native messaging host.', 'host_exited'],
  ['Error when communicating with the native messaging host.', 'host_io'],
  ['Invalid native messaging host name specified.', 'disconnected'],
  [undefined, 'disconnected'],
];
const CONNECT_THROWS = ['Specified native messaging host not found.', 'Access to the specified native messaging host is forbidden.'];
const TOO_LARGE = 'Message exceeded maximum allowed size of 64MiB.';

const READS = ['history.get', 'history.meta', 'sessions.list', 'settings.get', 'sessions.get'];
const WRITES = ['history.append', 'settings.set', 'sessions.save', 'history.clear', 'sessions.appendTo'];
/** extension/README.md: writes are retried once with the same id after these. */
const RETRYABLE = new Set(['timeout', 'disconnected', 'host_exited', 'host_io']);
const HOST_CODES = ['bad_request', 'busy', 'internal', 'not_found', 'conflict', 'db_corrupt'];

function newTotals() {
  return {
    schedules: 0,
    requests: 0,
    reads: 0,
    writes: 0,
    attempts: 0,
    wires: 0,
    leaked: 0,
    chunkMismatches: 0,
    replyMismatches: 0,
    crossed: 0,
    retries: 0,
    retrySameId: 0,
    retriesOnWire: 0,
    wholeReplies: 0,
    errorReplies: 0,
    chunkedReplies: 0,
    chunkedOk: 0,
    chunkFrames: 0,
    dropped: 0,
    timeouts: 0,
    lateReplies: 0,
    duplicates: 0,
    unknownIds: 0,
    staleFrames: 0,
    events: 0,
    disconnects: Object.fromEntries(DISCONNECTS.map(([m]) => [String(m), 0])),
    clientCloses: 0,
    connectThrows: 0,
    postThrows: 0,
    reconnects: 0,
    idleCloses: 0,
    opens: 0,
    violations: 0,
    failed: [],
  };
}

const short = (v) => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 160 ? `${s.slice(0, 160)}…` : s;
};

/**
 * One schedule. `mutant` plants a bug in the test's own transport (never in the code under test)
 * to prove the oracles see it: 'chunk' corrupts one chunk piece in transit, 'retry-id' sends a
 * retry with a new clientRequestId, 'leak' never settles one request, 'cross' swaps two results.
 */
async function runSchedule(index, seed, totals, tracker, { mutant = null } = {}) {
  const rng = new Prng(seed);
  const clock = new FakeClock();
  tracker.now = clock.now;
  const trace = [];
  const note = (s) => {
    trace.push(`${String(clock.now()).padStart(6)} ms  ${s}`);
    if (trace.length > 60) trace.shift();
  };
  const violations = [];
  const violate = (what) => {
    violations.push(`${clock.now()} ms: ${what}`);
    note(`VIOLATION ${what}`);
  };

  const cfg = {
    idleMs: rng.pick([50, 300, 1000, 5000, 60_000]),
    backoffMs: rng.pick([[250, 1000, 4000, 15_000], [0], [10, 40], [100]]),
    readMs: rng.int(50, 3000),
    writeMs: rng.int(50, 5000),
    helloMs: rng.int(50, 3000),
    helloAuto: rng.pick([1, 0.9, 0.6]),
    connectThrow: rng.pick([0, 0, 0, 0.15]),
    postThrow: rng.pick([0, 0, 0.04]),
    steps: rng.int(5, 90),
    weights: {
      request: rng.pick([15, 25, 40]),
      host: rng.pick([20, 35, 55]),
      noise: rng.pick([3, 8]),
      tick: rng.pick([10, 20, 30]),
      hostClose: rng.pick([1, 3, 6]),
      clientClose: rng.pick([0, 1, 2]),
      resetBackoff: 1,
      open: 1,
    },
  };
  const timeoutFor = (op) => (op === 'host.hello' ? cfg.helloMs : WRITES.includes(op) ? cfg.writeMs : cfg.readMs);

  const env = { lastError: undefined };
  let drain = false;
  let closing = false;
  const ports = [];
  const wires = [];
  const wireIds = new Set();
  const logicals = new Map();
  const attempts = new Map();
  const opens = [];
  let attemptSeq = 0;
  let logicalSeq = 0;
  let cridSeq = 0;
  let noiseSeq = 0;
  let leakPlanted = false;
  let crossPlanted = null;

  const live = () => {
    const p = ports.at(-1);
    return p && p.isLive() ? p : null;
  };
  const settledWires = () => wires.reduce((n, w) => n + (w.rec?.settled ? 1 : 0), 0);
  const orphans = () => {
    for (const w of wires) {
      if (w.rec && !w.rec.settled && !w.port.isLive()) violate(`request ${w.id} (${w.op}) left waiting on dead port ${w.port.n}`);
    }
  };

  // ---- the fake host side -------------------------------------------------------------------

  const connect = () => {
    if (!drain && rng.chance(cfg.connectThrow)) {
      const m = rng.pick(CONNECT_THROWS);
      totals.connectThrows++;
      note(`connectNative throws "${m}"`);
      throw new Error(m);
    }
    for (const p of ports) if (p.isLive()) violate(`port ${ports.length} opened while port ${p.n} is live`);
    const port = new FakeNativePort();
    port.n = ports.length;
    port.hostClosed = false;
    port.wires = [];
    port.chunkStream = null;
    port.isLive = () => !port.disconnected && !port.hostClosed;
    port.throwOnPost = (msg) => {
      if (drain || msg.op === 'host.hello' || !rng.chance(cfg.postThrow)) return undefined;
      const a = attempts.get(msg.args?._a);
      if (a) a.postThrew = true;
      totals.postThrows++;
      note(`postMessage throws for ${msg.id} ${msg.op}`);
      return new Error(TOO_LARGE);
    };
    port.onPost = (msg) => onWire(port, msg);
    ports.push(port);
    if (ports.length > 1) totals.reconnects++;
    note(`connect → port ${port.n}`);
    return port;
  };

  function onWire(port, msg) {
    const rec = tracker.current;
    if (!rec) violate(`request ${msg.id} posted outside a promise executor`);
    const hello = msg.op === 'host.hello';
    const attempt = hello ? null : attempts.get(msg.args?._a);
    if (!hello && !attempt) violate(`request ${msg.id} carries no known attempt`);
    if (wireIds.has(msg.id)) violate(`request id ${msg.id} reused`);
    wireIds.add(msg.id);
    const w = {
      port,
      id: msg.id,
      op: msg.op,
      args: port.sent.at(-1).args,
      rec,
      sentAt: clock.now(),
      timeoutMs: hello ? timeoutFor('host.hello') : (attempt?.opts?.timeoutMs ?? timeoutFor(msg.op)),
      attempt,
      answered: false,
      dropped: false,
      reply: null,
      frames: null,
    };
    if (attempt) {
      if (attempt.wire) violate(`attempt a${attempt.a} posted twice`);
      attempt.wire = w;
    }
    port.wires.push(w);
    wires.push(w);
    totals.wires++;
    note(`post ${w.id} ${w.op}${attempt ? ` a${attempt.a} ${attempt.args.k}` : ''} on port ${port.n}`);
    if (drain || (hello && rng.chance(cfg.helloAuto))) {
      // the reply arrives as its own task, after the microtasks of this one
      setImmediate(() => {
        if (!w.answered && !w.dropped && port.isLive() && !port.chunkStream) answer(w, 'whole');
      });
    }
  }

  function makeReply(w, error) {
    if (error) {
      const code = rng.pick(HOST_CODES);
      return { id: w.id, ok: false, error: { code, message: `${code} for #${w.id}` } };
    }
    const result =
      w.op === 'host.hello'
        ? !drain && rng.chance(0.03)
          ? { ...HELLO, protocolVersion: PROTOCOL_VERSION + 1 }
          : { ...HELLO }
        : { k: w.args.k, a: w.args._a, wid: w.id, op: w.op, body: randomText(rng, rng.pick([3, 40, 400])) };
    return { id: w.id, ok: true, result };
  }

  /** The host answers `w`: 'whole' | 'error' | 'chunked' | 'chunkedError'. */
  function answer(w, kind) {
    const port = w.port;
    const error = kind === 'error' || kind === 'chunkedError';
    const reply = makeReply(w, error);
    w.answered = true;
    w.reply = reply;
    if (error) totals.errorReplies++;
    if (kind === 'whole' || kind === 'error') {
      totals.wholeReplies++;
      w.frames = [reply];
      note(`reply ${w.id} ${error ? reply.error.code : 'ok'}`);
      hostSend(port, reply, { w, reply, chunked: false });
      return;
    }
    const pieces = cutAtCodePoints(rng, JSON.stringify(reply), rng.int(1, 8));
    const frames = chunkFrames(w.id, pieces);
    w.frames = frames;
    totals.chunkedReplies++;
    totals.chunkFrames += frames.length;
    note(`reply ${w.id} ${error ? reply.error.code : 'ok'} in ${frames.length} chunks`);
    port.chunkStream = { w, reply, frames, next: 0 };
    sendNextPiece(port);
  }

  function sendNextPiece(port) {
    const cs = port.chunkStream;
    let f = cs.frames[cs.next++];
    const last = cs.next === cs.frames.length;
    if (last) port.chunkStream = null;
    if (mutant === 'chunk' && cs.frames.length > 1 && cs.next === 1 && typeof cs.reply.result?.body === 'string') {
      f = { ...f, data: f.data.replace(/"body":"/, '"body":"~') };
    }
    hostSend(port, f, last ? { w: cs.w, reply: cs.reply, chunked: true } : null);
  }

  /** Deliver one host frame (as Chrome decodes it) and check what it settled. */
  function hostSend(port, frame, final) {
    const decoded = JSON.parse(JSON.stringify(frame));
    const target = final?.w;
    const expectSettle = !!target && port.isLive() && !!target.rec && !target.rec.settled;
    if (target && !expectSettle) totals.lateReplies++;
    const before = settledWires();
    port.deliver(decoded);
    const settled = settledWires() - before;
    if (settled !== (expectSettle ? 1 : 0)) {
      violate(`frame ${short(frame)} on port ${port.n} (${port.isLive() ? 'live' : 'dead'}) settled ${settled} requests, expected ${expectSettle ? 1 : 0}`);
    }
    if (expectSettle) checkReply(target, final);
  }

  function checkReply(w, { reply, chunked }) {
    const r = w.rec;
    const expected = JSON.parse(JSON.stringify(reply));
    if (expected.ok) {
      const good = r.settled && r.how === 'resolve' && isDeepStrictEqual(r.value, expected.result);
      if (!good) {
        if (chunked) totals.chunkMismatches++;
        else totals.replyMismatches++;
        violate(`${w.id} ${w.op}: ${chunked ? 'chunked ' : ''}reply ${short(expected.result)} became ${r.how} ${short(r.value?.message ?? r.value)}`);
      } else if (chunked) totals.chunkedOk++;
    } else {
      const e = r.value;
      const good =
        r.settled && r.how === 'reject' && e instanceof HostError && e.code === expected.error.code && e.message === expected.error.message;
      if (!good) {
        if (chunked) totals.chunkMismatches++;
        else totals.replyMismatches++;
        violate(`${w.id} ${w.op}: error reply ${short(expected.error)} became ${r.how} ${short(e?.code ?? e)}`);
      }
    }
  }

  function hostClose(port, message, code) {
    const open = wires.filter((w) => w.rec && !w.rec.settled);
    const before = settledWires();
    env.lastError = message;
    port.hostClosed = true;
    port.chunkStream = null;
    note(`host closes port ${port.n}: ${message}`);
    port.onDisconnect.fire(port);
    env.lastError = undefined;
    totals.disconnects[String(message)]++;
    for (const w of open) {
      const r = w.rec;
      const e = r.value;
      if (!(r.settled && r.how === 'reject' && e instanceof HostError && e.code === code && e.browserMessage === (message ?? null))) {
        violate(`disconnect "${message}": ${w.id} ${w.op} became ${r.how} ${short(e?.code)} / ${short(e?.browserMessage)}, expected ${code}`);
      }
    }
    if (settledWires() - before !== open.length) violate(`disconnect settled ${settledWires() - before} of ${open.length}`);
  }

  /**
   * Move the clock `ms` forward the way an event loop does: each due timer is its own task, with
   * the microtasks drained before and after it. A timer task may settle only the request it
   * times out, exactly at its deadline.
   */
  async function tick(ms) {
    const end = clock.now() + ms;
    for (;;) {
      await flush();
      const waiting = wires.filter((w) => w.rec && !w.rec.settled);
      if (!clock.fireNext(end)) break;
      for (const w of waiting) {
        const r = w.rec;
        if (!r.settled) continue;
        totals.timeouts++;
        const ok = r.how === 'reject' && r.value instanceof HostError && r.value.code === 'timeout' && r.at === w.sentAt + w.timeoutMs;
        if (!ok) violate(`a timer settled ${w.id} ${w.op} (deadline ${w.sentAt + w.timeoutMs}) with ${r.how} ${short(r.value?.code)} at ${r.at}`);
      }
    }
    for (const w of wires) {
      if (w.rec && !w.rec.settled && w.sentAt + w.timeoutMs <= clock.now()) {
        violate(`${w.id} ${w.op} still waiting ${clock.now() - w.sentAt} ms after it was sent (timeout ${w.timeoutMs})`);
      }
    }
    await flush();
  }

  // ---- the client side ----------------------------------------------------------------------

  const np = new NativePort({
    connect,
    clock,
    idleMs: cfg.idleMs,
    backoffMs: cfg.backoffMs,
    timeoutFor,
    lastError: () => env.lastError,
  });
  np.on('state', (s) => {
    note(`state ${s.state}${s.error ? ` (${s.error.code})` : ''}`);
    if (s.state === 'idle' && !closing) {
      totals.idleCloses++;
      if (wires.some((w) => w.rec && !w.rec.settled)) violate('idle close with requests waiting');
    }
  });
  const events = [];
  np.on('changed', (e) => events.push(e));

  const call = (op, args, opts) => {
    const logical = logicals.get(args.k);
    const a = ++attemptSeq;
    const attempt = { a, op, args, opts, logical, settled: 0, outcome: null, wire: null, postThrew: false };
    logical.attempts.push(attempt);
    attempts.set(a, attempt);
    totals.attempts++;
    let sent = { ...args, _a: a };
    if (mutant === 'retry-id' && logical.attempts.length === 2) {
      sent = { ...sent, clientRequestId: `${args.clientRequestId}-x` };
      attempt.args = sent;
    }
    let p = np.request(op, sent, opts);
    if (mutant === 'leak' && !leakPlanted && a === 3) {
      leakPlanted = true;
      p.catch(() => {});
      p = new Promise(() => {});
    }
    if (mutant === 'cross') {
      const inner = p;
      p = inner.then((v) => {
        if (crossPlanted && crossPlanted !== attempt) {
          const other = crossPlanted.value;
          crossPlanted = null;
          return other;
        }
        if (!crossPlanted) crossPlanted = { attempt, value: v };
        return v;
      });
    }
    p.then(
      (v) => {
        attempt.settled++;
        attempt.outcome = { ok: true, v };
      },
      (e) => {
        attempt.settled++;
        attempt.outcome = { ok: false, e };
      },
    );
    return p;
  };
  const storage = createStorage(call, { newId: () => `crid-${index}-${++cridSeq}` });

  function request() {
    const write = rng.chance(0.5);
    const op = rng.pick(write ? WRITES : READS);
    const k = `k${++logicalSeq}`;
    const args = write ? { k, entry: { role: 'user', content: randomText(rng, 12) } } : { k };
    if (write && rng.chance(0.1)) args.clientRequestId = `given-${index}-${k}`;
    const opts = rng.chance(0.2) ? { timeoutMs: rng.int(1, 3000) } : undefined;
    const logical = { k, op, write, args: { ...args }, attempts: [], settled: 0, outcome: null };
    logicals.set(k, logical);
    totals.requests++;
    if (write) totals.writes++;
    else totals.reads++;
    note(`call ${op} ${k}${opts ? ` timeout ${opts.timeoutMs}` : ''}`);
    const [area, name] = op.split('.');
    storage[area][name](args, opts).then(
      (v) => {
        logical.settled++;
        logical.outcome = { ok: true, v };
      },
      (e) => {
        logical.settled++;
        logical.outcome = { ok: false, e };
      },
    );
    return logical;
  }

  function noise() {
    const port = live();
    const kind = rng.weighted({ duplicate: 4, unknown: 2, nullId: 1, event: 2, stale: 2, unknownChunk: 1 });
    const n = ++noiseSeq;
    if (kind === 'stale') {
      const dead = ports.filter((p) => !p.isLive() && p.wires.length);
      if (!dead.length) return;
      const p = rng.pick(dead);
      const w = rng.pick(p.wires);
      totals.staleFrames++;
      const evCount = events.length;
      note(`stale frame for ${w.id} on dead port ${p.n}`);
      hostSend(p, rng.chance(0.5) ? makeReply(w, false) : { event: 'changed', seq: -n, areas: {} }, null);
      if (events.length !== evCount) violate(`an event on dead port ${p.n} was emitted`);
      return;
    }
    if (!port || port.chunkStream) return; // chunks of one reply are consecutive (PROTOCOL.md §3)
    if (kind === 'duplicate') {
      const done = port.wires.filter((w) => w.answered && w.frames);
      if (!done.length) return;
      const w = rng.pick(done);
      totals.duplicates++;
      note(`duplicate of ${w.id} (${w.frames.length} frames)`);
      for (const f of w.frames) hostSend(port, f, null);
    } else if (kind === 'unknown') {
      totals.unknownIds++;
      const id = rng.pick([1e9 + n, `s${n}`, -n, 0]);
      note(`reply for unknown id ${id}`);
      hostSend(port, rng.chance(0.5) ? { id, ok: true, result: { k: 'nobody' } } : { id, ok: false, error: { code: 'internal', message: 'x' } }, null);
    } else if (kind === 'unknownChunk') {
      totals.unknownIds++;
      note('chunk for an unknown id');
      hostSend(port, { id: 1e9 + n, chunk: { index: 0, count: 2 }, data: '{"id":' }, null);
    } else if (kind === 'nullId') {
      totals.unknownIds++;
      note('error reply with id null');
      hostSend(port, { id: null, ok: false, error: { code: 'bad_request', message: 'the frame is not JSON' } }, null);
    } else {
      const ev = { event: 'changed', seq: n, areas: { history: true } };
      if (rng.chance(0.5)) ev.clientRequestId = `c-${n}`;
      const before = events.length;
      note(`event changed ${n}`);
      hostSend(port, ev, null);
      totals.events++;
      if (events.length !== before + 1 || !isDeepStrictEqual(events.at(-1), ev)) violate(`event ${short(ev)} not emitted once as sent`);
    }
  }

  function hostAct() {
    const port = live();
    if (!port) return;
    if (port.chunkStream) {
      sendNextPiece(port);
      return;
    }
    const open = port.wires.filter((w) => !w.answered && !w.dropped);
    if (!open.length) return;
    const w = rng.pick(open);
    const kind = rng.weighted({ whole: 40, error: 8, chunked: 25, chunkedError: 3, drop: 7 });
    if (kind === 'drop') {
      w.dropped = true;
      totals.dropped++;
      note(`host reply to ${w.id} is invalid: Chrome drops it`);
      return;
    }
    answer(w, kind);
  }

  /**
   * After a call from the extension: end the task (drain the microtasks), or go on in the same
   * task, or a few microtasks later (the worker calls again after an await).
   */
  async function afterClientCall() {
    const y = rng.next();
    if (y < 0.5) await flush();
    else if (y < 0.8) for (let i = rng.int(1, 5); i > 0; i--) await null;
    orphans();
  }

  // ---- the schedule -------------------------------------------------------------------------

  for (let step = 0; step < cfg.steps; step++) {
    const action = rng.weighted(cfg.weights);
    const hostSide = action === 'host' || action === 'noise' || action === 'tick' || action === 'hostClose';
    // a host frame, a disconnect or a timer is a task of its own: it starts with no microtask queued
    if (hostSide) await flush();
    if (action === 'request') request();
    else if (action === 'host') hostAct();
    else if (action === 'noise') noise();
    else if (action === 'tick') {
      const r = rng.next();
      const ms = r < 0.6 ? rng.int(0, 50) : r < 0.9 ? rng.int(50, 2500) : rng.int(2500, 70_000);
      note(`tick ${ms}`);
      await tick(ms);
    } else if (action === 'hostClose') {
      const port = live();
      if (port) {
        const [message, code] = rng.pick(DISCONNECTS);
        hostClose(port, message, code);
      }
    } else if (action === 'clientClose') {
      const open = wires.filter((w) => w.rec && !w.rec.settled);
      closing = true;
      note('np.close()');
      np.close();
      closing = false;
      totals.clientCloses++;
      for (const w of open) {
        const r = w.rec;
        if (!(r.settled && r.how === 'reject' && r.value?.code === 'disconnected')) violate(`close(): ${w.id} became ${r.how} ${short(r.value?.code)}`);
      }
    } else if (action === 'resetBackoff') {
      note('resetBackoff()');
      np.resetBackoff();
    } else if (action === 'open') {
      const o = { settled: 0 };
      opens.push(o);
      totals.opens++;
      note('np.open()');
      np.open().then(
        () => o.settled++,
        () => o.settled++,
      );
    }
    orphans();
    if (hostSide) await flush();
    else await afterClientCall();
  }

  // ---- drain: the host behaves; everything must settle --------------------------------------

  drain = true;
  note('drain');
  const allSettled = () => [...logicals.values()].every((l) => l.settled) && opens.every((o) => o.settled);
  const settle = async () => {
    let idle = 0;
    for (let i = 0; i < 1000 && !allSettled() && idle < 3; i++) {
      const p = live();
      const work = p && (p.chunkStream || p.wires.some((w) => !w.answered && !w.dropped));
      if (p) {
        // each frame is a task of its own
        while (p.chunkStream && p.isLive()) {
          await flush();
          if (p.chunkStream) sendNextPiece(p);
        }
        for (const w of [...p.wires]) {
          await flush();
          if (!w.answered && !w.dropped && p.isLive() && !p.chunkStream) answer(w, 'whole');
        }
      }
      // nothing to answer and nothing armed: whatever is still waiting waits forever (a leak)
      idle = !work && clock.nextTimerAt === null ? idle + 1 : 0;
      await flush();
      // jump to the next timer (a timeout, a backoff wait, the idle close) when nothing else moves
      const next = clock.nextTimerAt;
      await tick(next === null ? 250 : Math.max(0, Math.min(next - clock.now(), 5000)));
      orphans();
    }
  };
  await settle();
  // the port still works: one more read succeeds
  const probe = request();
  await settle();
  if (!probe.outcome?.ok) violate(`the port is not usable after the schedule: ${short(probe.outcome?.e?.code)} ${probe.outcome?.e?.message}`);
  await tick(cfg.idleMs + 1);
  if (clock.timerCount !== 0) violate(`${clock.timerCount} timers left armed after the idle period`);
  if (np.pendingCount !== 0) violate(`${np.pendingCount} requests pending at the end`);

  // ---- end-of-schedule accounting ---------------------------------------------------------------

  let leaked = 0;
  for (const l of logicals.values()) {
    if (l.settled !== 1) {
      leaked++;
      violate(`call ${l.k} ${l.op} settled ${l.settled} times`);
    }
  }
  for (const a of attempts.values()) {
    if (a.settled !== 1) {
      leaked++;
      violate(`attempt a${a.a} (${a.args.k} ${a.op}) settled ${a.settled} times`);
    }
  }
  for (const w of wires) {
    if (w.rec && !w.rec.settled) {
      leaked++;
      violate(`wire request ${w.id} ${w.op} never settled`);
    }
  }
  for (const o of opens) {
    if (o.settled !== 1) {
      leaked++;
      violate('open() never settled');
    }
  }
  totals.leaked += leaked;

  for (const a of attempts.values()) {
    if (!a.outcome) continue;
    const w = a.wire;
    if (a.outcome.ok) {
      const v = a.outcome.v;
      if (!w) {
        totals.crossed++;
        violate(`attempt a${a.a} resolved without being sent`);
      } else if (!(w.rec?.how === 'resolve' && w.rec?.value === v) || v?.k !== a.args.k || v?.a !== a.a || v?.wid !== w.id) {
        totals.crossed++;
        violate(`attempt a${a.a} (${a.args.k}) got ${short(v)}, not its own reply`);
      }
    } else {
      const e = a.outcome.e;
      if (!(e instanceof HostError) || typeof e.code !== 'string') violate(`attempt a${a.a} rejected with ${short(e)}`);
      if (a.postThrew && e?.code !== 'too_large_outbound') violate(`attempt a${a.a}: postMessage threw 64 MiB but got ${e?.code}`);
      if (w && !(w.rec?.how === 'reject' && w.rec.value === e)) violate(`attempt a${a.a} rejected with an error that is not its request's`);
    }
    if (w) {
      const { _a, ...wireArgs } = w.args;
      void _a;
      if (!isDeepStrictEqual(wireArgs, JSON.parse(JSON.stringify(a.args)))) violate(`attempt a${a.a}: wire args ${short(w.args)} differ from ${short(a.args)}`);
    }
  }

  for (const l of logicals.values()) {
    const A = l.attempts;
    if (!A.length) {
      violate(`call ${l.k} made no attempt`);
      continue;
    }
    if (!l.write) {
      if (A.length !== 1) violate(`read ${l.k} was sent ${A.length} times`);
      if (Object.hasOwn(A[0].args, 'clientRequestId')) violate(`read ${l.k} carries a clientRequestId`);
    } else {
      const crid = A[0].args.clientRequestId;
      if (typeof crid !== 'string' || !crid) violate(`write ${l.k} has no clientRequestId`);
      if (l.args.clientRequestId && crid !== l.args.clientRequestId) violate(`write ${l.k} lost the caller's clientRequestId`);
      const first = A[0].outcome;
      const retryable = first && !first.ok && RETRYABLE.has(first.e?.code);
      if (retryable) {
        if (A.length !== 2) violate(`write ${l.k} failed with ${first.e.code} and was sent ${A.length} times, not twice`);
        else {
          totals.retries++;
          const onWire = A[0].wire && A[1].wire;
          if (onWire) totals.retriesOnWire++;
          const same =
            A[1].args.clientRequestId === crid && (!onWire || A[0].wire.args.clientRequestId === A[1].wire.args.clientRequestId);
          if (same) totals.retrySameId++;
          else violate(`write ${l.k} was retried with clientRequestId ${A[1].args.clientRequestId}, first ${crid}`);
        }
      } else if (A.length !== 1) violate(`write ${l.k} was sent ${A.length} times after ${first?.ok ? 'success' : first?.e?.code}`);
    }
    const last = A.at(-1).outcome;
    const out = l.outcome;
    if (out && last && (out.ok !== last.ok || (out.ok ? out.v !== last.v : out.e !== last.e))) {
      violate(`call ${l.k} did not get its last attempt's outcome`);
    }
  }

  totals.schedules++;
  if (violations.length) {
    totals.violations += violations.length;
    if (totals.failed.length < 3) totals.failed.push({ index, seed, cfg, violations: violations.slice(0, 8), trace: [...trace] });
  }
  return violations.length;
}

function report(totals) {
  return totals.failed
    .map(
      (f) =>
        `schedule ${f.index} (replay: KEEPSAKE_SEED=${SEED} KEEPSAKE_T23_ONLY=${f.index}; schedule seed ${f.seed})\n` +
        `  config ${JSON.stringify(f.cfg)}\n  ${f.violations.join('\n  ')}\n  trace (last steps):\n    ${f.trace.join('\n    ')}`,
    )
    .join('\n\n');
}

test('the settlement tracker counts a second resolve/reject', () => {
  const tracker = trackSettlements();
  tracker.install();
  try {
    let rec;
    const p = new Promise((resolve, reject) => {
      rec = tracker.current;
      resolve(1);
      reject(new Error('late'));
      resolve(2);
    });
    void p;
    assert.equal(tracker.doubles, 2);
    assert.equal(rec.how, 'resolve');
    assert.equal(rec.value, 1);
  } finally {
    tracker.uninstall();
  }
  assert.equal(globalThis.Promise, Object.getPrototypeOf(Promise.resolve()).constructor);
});

test('the oracles catch planted bugs in the test transport', async () => {
  for (const mutant of ['chunk', 'retry-id', 'leak', 'cross']) {
    const totals = newTotals();
    const tracker = trackSettlements();
    tracker.install();
    let bad = 0;
    try {
      for (let i = 0; i < 40 && bad === 0; i++) bad += await runSchedule(i, subSeed(12345, i), totals, tracker, { mutant });
    } finally {
      tracker.uninstall();
    }
    assert.ok(bad > 0, `mutant "${mutant}" went unnoticed in 40 schedules`);
    if (mutant === 'chunk') assert.ok(totals.chunkMismatches > 0);
    if (mutant === 'leak') assert.ok(totals.leaked > 0);
  }
});

test(`T23: ${SCHEDULES} random schedules against NativePort + createStorage`, { timeout: 1_800_000 }, async (t) => {
  const started = Date.now();
  const totals = newTotals();
  const tracker = trackSettlements();
  console.log(`T23 seed ${SEED} (replay with KEEPSAKE_SEED=${SEED}), ${SCHEDULES} schedules`);
  tracker.install();
  try {
    for (let i = 0; i < SCHEDULES; i++) {
      if (ONLY !== null && i !== ONLY) continue;
      await runSchedule(i, subSeed(SEED, i), totals, tracker);
    }
  } finally {
    tracker.uninstall();
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  const sameIdPct = totals.retries ? ((100 * totals.retrySameId) / totals.retries).toFixed(totals.retrySameId === totals.retries ? 0 : 2) : '100';
  const disc = Object.entries(totals.disconnects)
    .map(([m, n]) => `${m === 'undefined' ? '(no message)' : m.replace(/\.$/, '')} ${n}`)
    .join('; ');
  console.log(
    `T23 coverage: attempts ${totals.attempts} (reads ${totals.reads}, writes ${totals.writes}), wire requests ${totals.wires}, ` +
      `whole replies ${totals.wholeReplies}, error replies ${totals.errorReplies}, chunked replies ${totals.chunkedReplies} ` +
      `(${totals.chunkFrames} frames, ${totals.chunkedOk} reassembled and checked), dropped ${totals.dropped}, timeouts ${totals.timeouts}, ` +
      `late replies ${totals.lateReplies}, duplicates ${totals.duplicates}, unknown/null ids ${totals.unknownIds}, ` +
      `frames on dead ports ${totals.staleFrames}, events ${totals.events}, client closes ${totals.clientCloses}, ` +
      `connect throws ${totals.connectThrows}, 64 MiB throws ${totals.postThrows}, reconnects ${totals.reconnects}, ` +
      `idle closes ${totals.idleCloses}, open() ${totals.opens}, retries on the wire ${totals.retriesOnWire}, ` +
      `other reply mismatches ${totals.replyMismatches}, crossed replies ${totals.crossed}`,
  );
  console.log(`T23 disconnects: ${disc}`);
  console.log(
    `T23: schedules ${totals.schedules}, requests ${totals.requests}, leaked ${totals.leaked}, double ${tracker.doubles}, ` +
      `chunk mismatches ${totals.chunkMismatches}, retries ${totals.retries} (same id ${sameIdPct}%); ${secs} s`,
  );
  t.diagnostic(`T23 wall time ${secs} s`);

  if (tracker.doubles) console.log(`double settlement stacks:\n${tracker.doubleStacks.join('\n---\n')}`);
  assert.equal(totals.violations, 0, `${totals.violations} violations\n\n${report(totals)}`);
  assert.equal(totals.leaked, 0);
  assert.equal(tracker.doubles, 0);
  assert.equal(totals.chunkMismatches, 0);
  assert.equal(totals.crossed, 0);
  assert.equal(totals.retrySameId, totals.retries);
  if (ONLY === null && SCHEDULES >= 500) {
    // the schedules are not vacuous: every fault kind happened
    for (const [name, n] of Object.entries({
      'chunked replies checked': totals.chunkedOk,
      timeouts: totals.timeouts,
      retries: totals.retries,
      'retries on the wire': totals.retriesOnWire,
      'late replies': totals.lateReplies,
      duplicates: totals.duplicates,
      'unknown ids': totals.unknownIds,
      'dead-port frames': totals.staleFrames,
      reconnects: totals.reconnects,
      'idle closes': totals.idleCloses,
      'client closes': totals.clientCloses,
      'connect throws': totals.connectThrows,
      '64 MiB throws': totals.postThrows,
      ...Object.fromEntries(Object.entries(totals.disconnects).map(([m, n2]) => [`disconnect ${m}`, n2])),
    })) {
      assert.ok(n > 0, `no ${name} in ${totals.schedules} schedules`);
    }
  }
});
