// An in-memory stand-in for the host's backup operations (issue 36, PROTOCOL.md `backups.*`) and
// the four backup settings, shaped like `createStorage`'s client, for the node tests of
// options/backups.js. The "database" is a list of chat names; a copy holds a snapshot of it. A
// restore first copies the current database (`prerestore`), then puts the chosen snapshot in its
// place; `undo` names that copy until the next write, as the host's does. Every call is logged in
// `calls`; `hold(op)` makes the next call of `op` wait for `release()`. Not loaded by the extension.

import { deferred } from './fakes.js';

function hostError(code, message = code) {
  const e = new Error(message);
  e.code = code;
  return e;
}

const clone = (v) => JSON.parse(JSON.stringify(v));
const DAY = 864e5;

/** The host's checks of the four settings (src/domain/settings.rs `check_value`), as messages. */
function checkSetting(key, v) {
  const whole = (x) => Number.isSafeInteger(x) && x >= 0;
  switch (key) {
    case 'backupsEnabled': return typeof v === 'boolean' ? '' : `${key} must be a boolean`;
    case 'backupFolder': return typeof v === 'string' && (v === '' || v.startsWith('/')) ? '' : `${key} must be an absolute path or empty`;
    case 'backupDaily': return whole(v) && v >= 1 && v <= 365 ? '' : `${key} must be a whole number from 1 to 365`;
    case 'backupWeekly': return whole(v) && v <= 52 ? '' : `${key} must be a whole number from 0 to 52`;
    default: return '';
  }
}

/**
 * fakeBackups({chats, copies: [{id?, kind, createdAt, schemaVersion?, chats: [names]}], last,
 *              settings, folder, now})
 * → {storage, calls, state, ops(), hold(op), release(), failNext(op, err)}
 */
export function fakeBackups({
  chats = ['Today 1', 'Today 2'],
  copies = [],
  last = null,
  settings = {},
  folder = '/home/u/.local/share/keepsake/backups',
  now = () => 1_800_000_000_000,
} = {}) {
  let n = 0;
  const name = (kind, at) => `keepsake-${kind}-${new Date(at).toISOString().replace(/[-:]/g, '').slice(0, 15)}Z-v7-${++n}`;
  const copyOf = (kind, at, list, schemaVersion = 7) => ({ id: name(kind, at), kind, createdAt: at, schemaVersion, sessions: list.length, bytes: 4096 * (list.length + 1), snapshot: [...list] });
  const state = {
    chats: [...chats],
    copies: copies.map((c) => ({ ...copyOf(c.kind, c.createdAt ?? now() - DAY, c.chats ?? [], c.schemaVersion), ...(c.id ? { id: c.id } : {}) })),
    last: clone(last),
    settings: clone(settings),
    folder,
    undo: null,
  };
  const calls = [];
  const log = (op, args) => calls.push({ op, args: clone(args ?? {}) });
  const holds = new Map();
  const fails = new Map();
  const gate = async (op) => {
    const f = fails.get(op);
    if (f) { fails.delete(op); throw f; }
    const d = holds.get(op);
    if (d) { holds.delete(op); await d.promise; }
  };
  const pub = ({ snapshot, ...c }) => c;
  let released = [];

  const storage = {
    settings: {
      async get(args) {
        log('settings.get', args);
        return clone(Object.fromEntries(args.keys.filter((k) => k in state.settings).map((k) => [k, state.settings[k]])));
      },
      async set(args) {
        log('settings.set', args);
        await gate('settings.set');
        for (const [k, v] of Object.entries(args.map)) {
          const why = checkSetting(k, v);
          if (why) throw hostError('bad_request', why);
        }
        Object.assign(state.settings, clone(args.map));
        state.undo = null; // a write ends the undo of a restore
        return {};
      },
    },
    backups: {
      async list(args) {
        log('backups.list', args);
        await gate('backups.list');
        const copies = [...state.copies].sort((a, b) => b.createdAt - a.createdAt).map(pub);
        const undo = state.undo ? { id: state.undo.id, createdAt: state.undo.createdAt } : null;
        return clone({ folder: state.folder, enabled: state.settings.backupsEnabled !== false, daily: state.settings.backupDaily ?? 7, weekly: state.settings.backupWeekly ?? 4, copies, last: state.last, undo });
      },
      async create(args) {
        log('backups.create', args);
        await gate('backups.create');
        const c = copyOf('manual', now(), state.chats);
        state.copies.push(c);
        return clone({ copy: pub(c) });
      },
      async restore(args) {
        log('backups.restore', args);
        await gate('backups.restore');
        const chosen = state.copies.find((c) => c.id === args.id);
        if (!chosen) throw hostError('not_found', 'no copy has that id');
        const before = copyOf('prerestore', now(), state.chats);
        state.copies.push(before);
        state.chats = [...chosen.snapshot];
        state.undo = before;
        return { restored: chosen.id, undo: before.id, schemaVersion: 7 };
      },
    },
  };
  return {
    storage,
    calls,
    state,
    ops: () => calls.map((c) => c.op),
    /** The next call of `op` waits until `release()`. */
    hold(op) {
      const d = deferred();
      holds.set(op, d);
      released.push(d);
    },
    release() {
      for (const d of released) d.resolve();
      released = [];
    },
    /** The next call of `op` fails with `err`. */
    failNext(op, err) {
      fails.set(op, err);
    },
    hostError,
  };
}
