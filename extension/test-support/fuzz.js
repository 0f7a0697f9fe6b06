// Helpers for the randomized node --test suites (T23, reliability.md §10): a seeded PRNG, random
// text that stresses JSON and UTF-16, the host's chunk-frame format (PROTOCOL.md §3), and a
// settlement tracker that counts every call of a promise's resolve/reject. Not loaded by the
// extension.

/** A small, fast, seeded PRNG (mulberry32). Same seed → same sequence on every platform. */
export class Prng {
  #s;

  /** @param {number} seed a 32-bit unsigned integer */
  constructor(seed) {
    this.#s = seed >>> 0;
  }

  /** A float in [0, 1). */
  next() {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0;
    let t = this.#s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [lo, hi). */
  int(lo, hi) {
    return lo + Math.floor(this.next() * (hi - lo));
  }

  /** true with probability p. */
  chance(p) {
    return this.next() < p;
  }

  /** One element of a non-empty array. */
  pick(arr) {
    return arr[this.int(0, arr.length)];
  }

  /** A key of `weights` ({name: weight}), drawn by weight. */
  weighted(weights) {
    const entries = Object.entries(weights).filter(([, w]) => w > 0);
    const total = entries.reduce((a, [, w]) => a + w, 0);
    let x = this.next() * total;
    for (const [k, w] of entries) {
      x -= w;
      if (x < 0) return k;
    }
    return entries[entries.length - 1][0];
  }
}

/** The seed of a run: `KEEPSAKE_SEED` (decimal or 0x…) when set, else a random one. */
export function seedFromEnv(name = 'KEEPSAKE_SEED') {
  const v = process.env[name];
  if (v !== undefined && v !== '') {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`${name}=${v} is not a whole number`);
    return n >>> 0;
  }
  return (Math.random() * 2 ** 32) >>> 0;
}

/** The seed of schedule `i` of a run (each schedule can be replayed alone). */
export function subSeed(seed, i) {
  return (seed + Math.imul(i, 0x9e3779b9)) >>> 0;
}

/** `KEEPSAKE_LONG=1` → `long`, else `ci`; `override` (an env var name) wins when set. */
export function runSize(ci, long, override) {
  const o = override ? process.env[override] : undefined;
  if (o) return Number(o);
  return process.env.KEEPSAKE_LONG === '1' ? long : ci;
}

const ALPHABET = [
  ...'abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,;:!?-_/',
  '"',
  '\\',
  '\n',
  '\t',
  '\r',
  '\u0001',
  '\u001f',
  '\u2028',
  '\u2029',
  'é',
  'ß',
  'ü',
  '世',
  '界',
  '한',
  '\u0301', // combining acute
  '😀',
  '🧪',
  '👩‍💻', // a ZWJ sequence (several code points)
  '\u{10ffff}',
  '</script>',
  '{"id":1}',
  '\\u0000',
];

/** Random text of up to `max` pieces drawn from an alphabet that stresses JSON and UTF-16. */
export function randomText(rng, max) {
  const n = rng.int(0, max + 1);
  let s = '';
  for (let i = 0; i < n; i++) s += rng.pick(ALPHABET);
  return s;
}

/**
 * Cut `text` into `n` non-empty pieces at random code point boundaries (never inside a surrogate
 * pair), as the host cuts a reply's JSON text at char boundaries. Fewer pieces when the text is
 * too short.
 */
export function cutAtCodePoints(rng, text, n) {
  const bounds = [];
  for (let i = 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0xdc00 || c > 0xdfff) bounds.push(i); // not the low half of a pair
  }
  const cuts = new Set();
  while (cuts.size < Math.min(n - 1, bounds.length)) cuts.add(rng.pick(bounds));
  const sorted = [...cuts].sort((a, b) => a - b);
  const pieces = [];
  let from = 0;
  for (const c of sorted) {
    pieces.push(text.slice(from, c));
    from = c;
  }
  pieces.push(text.slice(from));
  return pieces;
}

/** The host's chunk frames for a reply (PROTOCOL.md §3): `{id, chunk: {index, count}, data}`. */
export function chunkFrames(id, pieces) {
  return pieces.map((data, index) => ({ id, chunk: { index, count: pieces.length }, data }));
}

/**
 * Count every call of every promise's resolve/reject while installed, by putting a subclass of
 * Promise in `globalThis.Promise` (code that writes `new Promise(…)` gets it; async functions and
 * the engine's own promises do not, and need not). A promise whose resolve/reject is called after
 * it was already settled is a double settlement.
 *
 *   const tracker = trackSettlements({ now: () => clock.now() });
 *   tracker.install();  … code under test …  tracker.uninstall();
 *   tracker.current     // inside a `new Promise` executor: that promise's record
 *   tracker.doubles     // calls after the first
 *
 * A record is `{settled, how: 'resolve' | 'reject', value, at, calls}`.
 */
export function trackSettlements({ now = () => 0 } = {}) {
  const Native = globalThis.Promise;
  const state = { current: null, doubles: 0, created: 0, doubleStacks: [], now };

  class TrackedPromise extends Native {
    constructor(executor) {
      const rec = { settled: false, how: null, value: undefined, at: null, calls: 0 };
      const wrap = (how, fn) => (v) => {
        rec.calls++;
        if (rec.settled) {
          state.doubles++;
          if (state.doubleStacks.length < 5) state.doubleStacks.push(new Error(`second ${how}`).stack);
        } else {
          rec.settled = true;
          rec.how = how;
          rec.value = v;
          rec.at = state.now();
        }
        fn(v);
      };
      super((resolve, reject) => {
        const prev = state.current;
        state.current = rec;
        try {
          executor(wrap('resolve', resolve), wrap('reject', reject));
        } catch (e) {
          if (!rec.settled) Object.assign(rec, { settled: true, how: 'reject', value: e, at: state.now() });
          throw e;
        } finally {
          state.current = prev;
        }
      });
      state.created++;
    }
  }

  return {
    install() {
      globalThis.Promise = TrackedPromise;
    },
    uninstall() {
      globalThis.Promise = Native;
    },
    /** The record of the promise whose executor is running now (null outside executors). */
    get current() {
      return state.current;
    },
    get doubles() {
      return state.doubles;
    },
    get doubleStacks() {
      return state.doubleStacks;
    },
    get created() {
      return state.created;
    },
    set now(fn) {
      state.now = fn;
    },
  };
}
