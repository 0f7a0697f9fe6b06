// "N earlier messages": the part of a long chat ahead of the live window (docs/keeps.md "The live
// window"). history.get says how many entries of the live chat's session are ahead of the window
// (`offset`); this reads them on request with sessions.get, a page at a time, nearest first, and
// keeps what it read in step with the window as it moves (a send that trims moves it forward, a
// version switch may move it back, another chat resets it). What it holds is always the entries
// just ahead of the window: body positions `offset − entries.length` … `offset − 1`.

import { EARLIER_PAGE, nextEarlierPage } from '../lib/ui/keeps.js';

/**
 * createEarlier({storage, show, page}) → {sync({sessionId, offset}), forget(), loadMore(), beforeId(), fetchBefore(), state}
 * `show({entries, from, remaining, loading})` is called whenever what to show changes.
 */
export function createEarlier({ storage, show, page = EARLIER_PAGE }) {
  let sessionId = '';
  let offset = 0;
  let entries = [];
  let before = null; // {position, entryId}: the entry just ahead of the window, read only to place a fork
  let loading = false;
  let gapPending = false; // the window moved forward and the entries in between are being read
  let gen = 0;

  const view = () => show({ entries, from: offset - entries.length, remaining: Math.max(0, offset - entries.length), loading });

  async function read(from, limit) {
    const r = await storage.sessions.get({ id: sessionId, from, limit, images: 'ref' });
    return Array.isArray(r?.entries) ? r.entries : [];
  }

  function reset(id, off) {
    gen += 1;
    gapPending = false;
    sessionId = id;
    offset = off;
    entries = [];
    before = null;
    loading = false;
  }

  /** After every history read: the live chat's session and the window's offset. */
  async function sync({ sessionId: id = '', offset: off = 0 } = {}) {
    const o = Math.max(0, Math.trunc(Number(off) || 0));
    if (id !== sessionId || !id) {
      reset(id, id ? o : 0);
      view();
      return;
    }
    if (o === offset) return;
    if (o < offset) {
      // the window moved back: what was read ahead of the new start is still ahead of it
      gen += 1;
      // (a gap still being read: what is held no longer ends at the window, so start over)
      entries = gapPending ? [] : entries.slice(0, Math.max(0, entries.length - (offset - o)));
      gapPending = false;
      loading = false;
      offset = o;
      before = null;
      view();
      return;
    }
    // the window moved forward past `o − offset` entries: read them, so what is shown stays contiguous
    const oldOffset = offset;
    offset = o;
    before = null;
    if (entries.length === 0) {
      view();
      return;
    }
    const my = ++gen;
    gapPending = true;
    try {
      const gap = await read(oldOffset, o - oldOffset);
      if (my !== gen) return;
      if (gap.length !== o - oldOffset) throw new Error('short read'); // i18n-ok: caught and retried, never shown
      entries = [...entries, ...gap];
    } catch {
      if (my !== gen) return;
      entries = [];
    } finally {
      if (my === gen) gapPending = false;
    }
    view();
  }

  /** Read the next page (nearest to the window first). Rejects with the host's error. */
  async function loadMore() {
    const p = nextEarlierPage(offset, entries.length, page);
    if (!p || loading || gapPending || !sessionId) return;
    const my = gen;
    loading = true;
    view();
    try {
      const got = await read(p.from, p.limit);
      if (my !== gen) return;
      entries = [...got, ...entries];
    } finally {
      if (my === gen) {
        loading = false;
        view();
      }
    }
  }

  /** entryId of the entry just ahead of the window, when known ('' otherwise). */
  function beforeId() {
    if (offset === 0 || gapPending) return '';
    if (entries.length) return entries[entries.length - 1]?.entryId || '';
    return before && before.position === offset - 1 ? before.entryId : '';
  }

  /** Read that entry's id (one entry) when it is not known yet; → the id or ''. */
  async function fetchBefore() {
    if (offset === 0 || beforeId() || !sessionId) return beforeId();
    const my = gen;
    const position = offset - 1;
    try {
      const [e] = await read(position, 1);
      if (my === gen && position === offset - 1 && e && typeof e.entryId === 'string') before = { position, entryId: e.entryId };
    } catch {
      /* forks at the window's first entry just show no controls */
    }
    return beforeId();
  }

  /**
   * Forget what was read: the next `sync` starts over even for the same chat and offset (a restore
   * put another database in place, so the same session id may now hold other entries).
   */
  function forget() {
    reset('', 0);
    view();
  }

  return {
    sync,
    forget,
    loadMore,
    beforeId,
    fetchBefore,
    get state() {
      return { sessionId, offset, from: offset - entries.length, entries, loading };
    },
  };
}
