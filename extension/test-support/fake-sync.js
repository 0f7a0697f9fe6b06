// An in-memory stand-in for the host's sync operations (issue 31, PROTOCOL.md "sync"), shaped like
// `createStorage`'s client (`s.sync.status(args)`), for the node tests of options/sync.js. The state
// is the `sync.status` object (this device among `devices` with `self: true`); `sync.pause` /
// `sync.resume` set `device.paused` and answer the status object, refused with `unsupported` when
// this database does not sync, as the host does; `arrive(id, n)` plays the reader applying another
// device's operations. Every call is logged in `calls`; `hold(op)` makes the next call of `op` wait
// for `release()`, `failNext(op, err)` makes it fail. Not loaded by the extension.

import { deferred } from './fakes.js';

function hostError(code, message = code) {
  const e = new Error(message);
  e.code = code;
  return e;
}

const clone = (v) => JSON.parse(JSON.stringify(v));

const ME = '3f0c2a9e-0000-4000-8000-000000000001';

/**
 * fakeSync({setUp, paused, folder, name, key, outbox, devices: [{id, name, opsApplied, pending,
 *           waitingPictures, lastAppliedAt}], problems, running, lastLookAt, now})
 * → {storage, calls, state, ops(), hold(op), release(), failNext(op, err), arrive(id, n, name), hostError}
 */
export function fakeSync({
  setUp = true,
  paused = false,
  folder = '/home/ana/Sync/Keepsake',
  name = 'ana-laptop',
  key = { kept: 'secretStore', secretStore: 'GNOME Keyring', reachable: true, reason: null, ok: true, detail: 'the sync key is in GNOME Keyring and opens the folder' },
  outbox = 0,
  devices = [],
  problems = [],
  running = true,
  lastLookAt = 1_800_000_000_000 - 2_000,
  now = () => 1_800_000_000_000,
} = {}) {
  const state = {
    setUp,
    device: { id: ME, name, folder, createdAt: 1_790_000_000_000, paused },
    running,
    key: clone(key),
    folder: { path: folder, reachable: true, detail: null },
    outbox,
    devices: [
      { id: ME, name, self: true, segments: 4, checkpoints: 0, applied: 0, pending: 0, waitingPictures: 0, opsApplied: 0 },
      ...devices.map((d) => ({ self: false, segments: 0, checkpoints: 0, applied: 0, pending: 0, waitingPictures: 0, opsApplied: 0, lastAppliedAt: null, ...d })),
    ],
    problems: clone(problems),
    lastLookAt,
  };
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
  const status = () => (state.setUp ? clone(state) : { setUp: false, problems: [] });
  const setPaused = async (op, args, on) => {
    log(op, args);
    await gate(op);
    if (!state.setUp) throw hostError('unsupported', 'this database does not sync');
    state.device.paused = on;
    return status();
  };

  const storage = {
    sync: {
      async status(args) {
        log('sync.status', args);
        await gate('sync.status');
        return status();
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
    /** The reader applied `n` operations (one segment) of device `id` now (seen first if it was not). */
    arrive(id, n = 1, deviceName = '') {
      let d = state.devices.find((x) => x.id === id);
      if (!d) state.devices.push((d = { id, name: deviceName, self: false, segments: 0, checkpoints: 0, applied: 0, pending: 0, waitingPictures: 0, opsApplied: 0, lastAppliedAt: null }));
      d.segments += 1;
      d.applied += 1;
      d.opsApplied += n;
      d.lastAppliedAt = now();
      state.lastLookAt = now();
    },
    hostError,
  };
}
