// Test doubles shared by the node --test suites: a manual clock, chrome.events-like events, a
// fake native port, and a fake `chrome` for storage.session + tabs. Not loaded by the extension.

/** Resolve after every queued microtask (and promise continuation) has run. */
export function flush() {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A promise with its resolve/reject exposed. */
export function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A manual clock implementing NativePort's `{now, setTimeout, clearTimeout}`. */
export class FakeClock {
  #t = 0;
  #seq = 0;
  #timers = new Map();

  now = () => this.#t;

  setTimeout = (fn, ms) => {
    const id = ++this.#seq;
    this.#timers.set(id, { at: this.#t + Math.max(0, ms ?? 0), fn });
    return id;
  };

  clearTimeout = (id) => {
    this.#timers.delete(id);
  };

  /** Number of armed timers. */
  get timerCount() {
    return this.#timers.size;
  }

  /** When the next armed timer fires (ms on this clock), or null when none is armed. */
  get nextTimerAt() {
    let at = null;
    for (const t of this.#timers.values()) if (at === null || t.at < at) at = t.at;
    return at;
  }

  /** Move time forward, firing due timers in order. */
  advance(ms) {
    const end = this.#t + ms;
    for (;;) {
      let next = null;
      for (const [id, t] of this.#timers) {
        if (t.at <= end && (next === null || t.at < next[1].at || (t.at === next[1].at && id < next[0]))) next = [id, t];
      }
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#t = next[1].at;
      next[1].fn();
    }
    this.#t = end;
  }

  /**
   * Fire only the earliest armed timer due at or before `until` (time moves to it) and return
   * true; when none is due, move time to `until` and return false. Lets a test drain the
   * microtasks between two timers, as an event loop does between two timer tasks.
   */
  fireNext(until) {
    let next = null;
    for (const [id, t] of this.#timers) {
      if (t.at <= until && (next === null || t.at < next[1].at || (t.at === next[1].at && id < next[0]))) next = [id, t];
    }
    if (!next) {
      this.#t = Math.max(this.#t, until);
      return false;
    }
    this.#timers.delete(next[0]);
    this.#t = next[1].at;
    next[1].fn();
    return true;
  }

  /** advance(ms), then let promise continuations run. */
  async tick(ms = 0) {
    this.advance(ms);
    await flush();
  }
}

/** A chrome.events.Event look-alike with a `fire` for tests. */
export function fakeEvent() {
  const listeners = new Set();
  return {
    addListener: (fn) => listeners.add(fn),
    removeListener: (fn) => listeners.delete(fn),
    hasListener: (fn) => listeners.has(fn),
    hasListeners: () => listeners.size > 0,
    fire: (...args) => {
      for (const fn of [...listeners]) fn(...args);
    },
    get size() {
      return listeners.size;
    },
  };
}

/** A chrome.runtime.Port for a native host, driven by the test. */
export class FakeNativePort {
  sent = [];
  disconnected = false;
  onMessage = fakeEvent();
  onDisconnect = fakeEvent();
  /** (msg) => Error|undefined: an error to throw synchronously from postMessage. */
  throwOnPost = null;
  /** (msg, port) => void: called after each accepted postMessage. */
  onPost = null;

  postMessage(msg) {
    if (this.disconnected) throw new Error('Attempting to use a disconnected port object');
    const e = this.throwOnPost?.(msg);
    if (e) throw e;
    this.sent.push(JSON.parse(JSON.stringify(msg)));
    this.onPost?.(msg, this);
  }

  disconnect() {
    this.disconnected = true;
  }

  /** Deliver a frame from the host. */
  deliver(frame) {
    this.onMessage.fire(frame, this);
  }

  reply(id, result) {
    this.deliver({ id, ok: true, result });
  }

  replyError(id, code, message = code) {
    this.deliver({ id, ok: false, error: { code, message } });
  }

  /** The last sent request with this op. */
  lastOf(op) {
    return [...this.sent].reverse().find((m) => m.op === op);
  }
}

/**
 * A fake `chrome` with storage.session and tabs for the site cache.
 * `tabs` maps tab id → tab object (alive); `tabGet` may override tabs.get per id.
 */
export function fakeChrome({ tabs = new Map(), session = new Map() } = {}) {
  const calls = { sessionGet: 0, tabsGet: [] };
  const chrome = {
    calls,
    sessionData: session,
    liveTabs: tabs,
    tabGetOverride: new Map(),
    storage: {
      session: {
        async get(keys) {
          calls.sessionGet++;
          if (keys === null || keys === undefined) return Object.fromEntries(session);
          const list = typeof keys === 'string' ? [keys] : Array.isArray(keys) ? keys : Object.keys(keys);
          return Object.fromEntries(list.filter((k) => session.has(k)).map((k) => [k, session.get(k)]));
        },
        async set(obj) {
          for (const [k, v] of Object.entries(obj)) session.set(k, JSON.parse(JSON.stringify(v)));
        },
        async remove(keys) {
          for (const k of typeof keys === 'string' ? [keys] : keys) session.delete(k);
        },
      },
    },
    tabs: {
      get(id) {
        calls.tabsGet.push(id);
        const override = chrome.tabGetOverride.get(id);
        if (override) return override();
        if (!tabs.has(id)) return Promise.reject(new Error(`No tab with id: ${id}.`));
        return Promise.resolve(tabs.get(id));
      },
      onRemoved: fakeEvent(),
      onUpdated: fakeEvent(),
      onReplaced: fakeEvent(),
    },
  };
  return chrome;
}
