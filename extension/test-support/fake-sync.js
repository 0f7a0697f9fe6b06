// An in-memory stand-in for the host's sync operations (issue 31, PROTOCOL.md `sync.*`), shaped like
// `createStorage`'s client (`s.sync.status(args)`), for the node tests of options/sync.js. The state
// is `sync.status`'s object; `sync.pause` / `sync.resume` set `paused` (refused with `bad_request`
// when sync is not set up, as the host does); `arrive(id, n)` plays operations of another device
// being applied. Every call is logged in `calls`; `hold(op)` makes the next call of `op` wait for
// `release()`, `failNext(op, err)` makes it fail. Not loaded by the extension.

import { deferred } from './fakes.js';

function hostError(code, message = code) {
  const e = new Error(message);
  e.code = code;
  return e;
}

const clone = (v) => JSON.parse(JSON.stringify(v));

/**
 * fakeSync({setUp, paused, folder, device: {id, name, createdAt}, outbox: {pending},
 *           devices: [{id, name, applied, pending, lastAppliedAt}], problems, now})
 * → {storage, calls, state, ops(), hold(op), release(), failNext(op, err), arrive(id, n), hostError}
 */
export function fakeSync({
  setUp = true,
  paused = false,
  folder = '/home/ana/Sync',
  device = { id: '3f0c2a9e-0000-4000-8000-000000000001', name: 'ana-laptop', createdAt: 1_790_000_000_000 },
  outbox = { pending: 0 },
  devices = [],
  problems = [],
  now = () => 1_800_000_000_000,
} = {}) {
  const state = { setUp, paused, folder, device: clone(device), outbox: clone(outbox), devices: clone(devices), problems: clone(problems) };
  const calls = [];
  const log = (op, args) => calls.push({ op, args: clone(args ?? {}) });
  const holds = new Map();
  const fails = new Map();
  let held = [];
  const gate = async (op) => {
    const f = fails.get(op);
    if (f) { fails.delete(op); throw f; }
    const d = holds.get(op);
    if (d) { holds.delete(op); await d.promise; }
  };
  const setPaused = async (op, args, on) => {
    log(op, args);
    await gate(op);
    if (!state.setUp) throw hostError('bad_request', 'sync is not set up here: keepsake-host sync init or join first');
    state.paused = on;
    return { paused: on };
  };

  const storage = {
    sync: {
      async status(args) {
        log('sync.status', args);
        await gate('sync.status');
        if (!state.setUp) return { setUp: false };
        return clone(state);
      },
      pause: (args) => setPaused('sync.pause', args, true),
      resume: (args) => setPaused('sync.resume', args, false),
    },
  };
  return {
    storage,
    calls,
    state,
    ops: () => calls.map((c) => c.op),
    hold(op) {
      const d = deferred();
      holds.set(op, d);
      held.push(d);
    },
    release() {
      for (const d of held) d.resolve();
      held = [];
    },
    failNext(op, err) {
      fails.set(op, err);
    },
    /** `n` operations of device `id` applied now (the device is seen first if it was not). */
    arrive(id, n = 1, name = '') {
      let d = state.devices.find((x) => x.id === id);
      if (!d) state.devices.push((d = { id, name, applied: 0, pending: 0, lastAppliedAt: null }));
      d.applied += n;
      d.lastAppliedAt = now();
    },
    hostError,
  };
}
