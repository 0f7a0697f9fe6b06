// An in-memory stand-in for the host's sessions, trash and import operations (docs/keeps.md), shaped
// like `createStorage`'s client (`s.sessions.list(args)`, `s.trash.restore(args)`…), for the node
// tests of the drawer, the eviction notice and the import confirm. Every call is logged in `calls`.
// Not loaded by the extension.

function hostError(code, message = code) {
  const e = new Error(message);
  e.code = code;
  return e;
}

const clone = (v) => JSON.parse(JSON.stringify(v));

/**
 * fakeKeeps({sessions: [{id, name, pinned?, createdAt?, entryCount?}], trash: [item], trashDays,
 *            activeSessionId, preview, importResult, settings})
 * → {storage, calls, state}
 */
export function fakeKeeps({
  sessions = [],
  trash = [],
  trashDays = 30,
  activeSessionId = '',
  preview = { sessionsNew: 0, sessionsSkipped: 0, liveEntries: 0, settings: [], settingsInvalid: 0, warnings: [] },
  importResult = { sessionsImported: 0, sessionsSkipped: 0, settingsImported: 0, settingsSkipped: 0, live: 'absent', imagesStored: 0, overCap: 0, warnings: [] },
  settings = {},
  now = () => 1_800_000_000_000,
} = {}) {
  const state = {
    sessions: sessions.map((s, i) => ({ pinned: false, createdAt: now() - i * 1000, entryCount: 2, ...s })),
    trash: clone(trash),
    trashDays,
    activeSessionId,
    settings: clone(settings),
    preview,
    importResult,
  };
  const calls = [];
  const log = (op, args) => calls.push({ op, args: clone(args ?? {}) });
  const find = (id) => state.sessions.find((s) => s.id === id);
  const toTrash = (s, reason) => {
    state.sessions = state.sessions.filter((x) => x !== s);
    state.trash.unshift({ id: s.id, kind: 'session', name: s.name, reason, trashedAt: now(), expiresAt: now() + state.trashDays * 864e5, entryCount: s.entryCount, createdAt: s.createdAt, pinned: s.pinned, _row: s });
    if (state.activeSessionId === s.id) state.activeSessionId = '';
  };
  const storage = {
    sessions: {
      // a page as the host gives one (`{rows, total, cursor}`); the fake's cursor is the row's id
      // and query (the host's is its sort key)
      async list(args) {
        log('sessions.list', args);
        const q = (args?.query || '').trim().toLowerCase();
        const limit = args?.limit ?? 50;
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw hostError('bad_request', 'limit');
        const all = state.sessions.filter((s) => !q || s.name.toLowerCase().includes(q))
          .sort((a, b) => Number(b.pinned) - Number(a.pinned) || b.createdAt - a.createdAt);
        let from = 0;
        if (args?.cursor != null) {
          const c = JSON.parse(args.cursor);
          if (c.q !== q) throw hostError('bad_request', 'cursor: made for another query');
          const key = (s) => [Number(s.pinned), s.createdAt];
          const after = (s) => { const [p, t] = key(s); return p < c.p || (p === c.p && t < c.t); };
          from = all.findIndex(after);
          if (from < 0) from = all.length;
        }
        const rows = all.slice(from, from + limit);
        const last = rows.at(-1);
        const cursor = from + limit < all.length && last ? JSON.stringify({ q, p: Number(last.pinned), t: last.createdAt }) : null;
        return clone({ rows, total: all.length, cursor });
      },
      async get(args) {
        log('sessions.get', args);
        const s = find(args.id);
        if (!s) throw hostError('not_found');
        return clone({ ...s, entries: [], from: 0, length: s.entryCount, forks: [] });
      },
      async rename(args) {
        log('sessions.rename', args);
        const s = find(args.id);
        if (!s) throw hostError('not_found');
        s.name = args.name;
        return {};
      },
      async pin(args) {
        log('sessions.pin', args);
        const s = find(args.id);
        if (!s) throw hostError('not_found');
        s.pinned = !!args.pinned;
        return {};
      },
      async delete(args) {
        log('sessions.delete', args);
        const s = find(args.id);
        if (!s) return { deleted: false };
        toTrash(s, 'deleted');
        return { deleted: true };
      },
      async clearAll(args) {
        log('sessions.clearAll', args);
        const all = [...state.sessions];
        for (const s of all) toTrash(s, 'cleared');
        return { deleted: all.length };
      },
      async evictionPlan(args) {
        log('sessions.evictionPlan', args);
        const cap = args.cap;
        if (!cap) return { evict: [] };
        const candidates = state.sessions.filter((s) => !s.pinned && s.id !== state.activeSessionId).sort((a, b) => a.createdAt - b.createdAt);
        const over = Math.max(0, state.sessions.length - cap);
        return { evict: clone(candidates.slice(0, over)) };
      },
      async export(args) {
        log('sessions.export', args);
        return { filename: 'x.json', text: '{}' };
      },
    },
    trash: {
      async list(args) {
        log('trash.list', args);
        return clone({ items: state.trash.map(({ _row, ...item }) => item), trashDays: state.trashDays });
      },
      async restore(args) {
        log('trash.restore', args);
        const i = state.trash.findIndex((t) => t.id === args.id);
        if (i < 0) throw hostError('not_found', 'nothing in the trash has that id');
        const [item] = state.trash.splice(i, 1);
        const row = item._row || { id: item.id, name: item.name, pinned: !!item.pinned, createdAt: item.createdAt ?? now(), entryCount: item.entryCount };
        state.sessions.push(row);
        return { sessionId: row.id, kind: item.kind };
      },
      async purge(args) {
        log('trash.purge', args);
        if (args.all) {
          const n = state.trash.length;
          state.trash = [];
          return { purged: n };
        }
        const i = state.trash.findIndex((t) => t.id === args.id);
        if (i < 0) throw hostError('not_found');
        state.trash.splice(i, 1);
        return { purged: 1 };
      },
    },
    settings: {
      async get(args) {
        log('settings.get', args);
        return clone(Object.fromEntries(args.keys.filter((k) => k in state.settings).map((k) => [k, state.settings[k]])));
      },
      async set(args) {
        log('settings.set', args);
        Object.assign(state.settings, clone(args.map));
        const out = {};
        if ('maxSessions' in args.map) {
          const plan = await storage.sessions.evictionPlan({ cap: args.map.maxSessions });
          calls.pop();
          for (const r of plan.evict) toTrash(find(r.id), 'evicted');
          out.evicted = plan.evict.map((r) => r.id);
        }
        return out;
      },
    },
    storage: {
      async importPreview(args) {
        log('storage.importPreview', args);
        return clone(state.preview);
      },
      async import(args) {
        log('storage.import', args);
        return clone(state.importResult);
      },
    },
  };
  return { storage, calls, state, ops: () => calls.map((c) => c.op) };
}
