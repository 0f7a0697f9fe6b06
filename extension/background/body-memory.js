// Request bodies as deltas (PROTOCOL.md "Body deltas"): the worker keeps the last body text the
// host sent it, names it in the next request.build (`since`) and receives only what changed.

let encodeBuf = new Uint8Array(0);

/**
 * sha256 of the UTF-8 of `text`, 64 lower-case hex digits: the host's `bodyHash`. Encodes into
 * a reused buffer (`encodeInto` is about twice as fast as `encode` on a 300K-char body).
 */
async function textHash(text, subtle = globalThis.crypto?.subtle) {
  const need = text.length * 3;
  if (encodeBuf.length < need) encodeBuf = new Uint8Array(need);
  const { written } = new TextEncoder().encodeInto(text, encodeBuf);
  const digest = new Uint8Array(await subtle.digest('SHA-256', encodeBuf.subarray(0, written)));
  if (encodeBuf.length > 4 * 1024 * 1024) encodeBuf = new Uint8Array(0); // keep only a modest buffer
  let hex = '';
  for (const b of digest) hex += b.toString(16).padStart(2, '0');
  return hex;
}

/**
 * `bodyDelta.ops` applied to `held`: each op is a literal string or `[start, end]`, a slice of
 * `held` in UTF-16 code units. Returns null when an op is malformed or out of range, or when
 * the result is not `length` units long.
 */
function applyBodyDelta(held, ops, length) {
  if (typeof held !== 'string' || !Array.isArray(ops)) return null;
  const parts = [];
  let n = 0;
  for (const op of ops) {
    if (typeof op === 'string') {
      parts.push(op);
      n += op.length;
      continue;
    }
    if (!Array.isArray(op) || op.length !== 2) return null;
    const [a, b] = op;
    if (!Number.isInteger(a) || !Number.isInteger(b) || a < 0 || a >= b || b > held.length) return null;
    parts.push(held.slice(a, b));
    n += b - a;
  }
  return n === length ? parts.join('') : null;
}

/**
 * The last request body text the host sent this worker and its hash, so the next
 * `request.build` can name it (`since`) and receive only what changed. Memory only: a worker
 * restart or a new host process costs one full body.
 */
export class BodyMemory {
  constructor({ subtle = globalThis.crypto?.subtle } = {}) {
    this.subtle = subtle;
    this.text = null;
    this.hash = null;
    this.stats = { full: 0, delta: 0, rejected: 0 };
  }

  /** Deltas need a digest to verify them. */
  get enabled() {
    return !!this.subtle && typeof TextEncoder === 'function';
  }

  snapshot() {
    return { text: this.text, hash: this.hash };
  }

  forget() {
    this.text = null;
    this.hash = null;
  }

  /**
   * The body text of a `request.build` reply made with `since: snap.hash`, and a check of it:
   * `bodyText` as is (nothing to check), or `bodyDelta` applied to `snap.text` (ranges and
   * length checked here; `check()` resolves whether its sha256 is `bodyHash`, and forgets it
   * when not). The text is kept for the next build at once. `undefined` when the reply has no
   * text form (a host that ignores `since`); null when the delta does not apply.
   * @returns {{text: string, check: () => Promise<boolean>} | null | undefined}
   */
  take(res, snap) {
    if (typeof res?.bodyText === 'string') {
      this.#keep(res.bodyText, res.bodyHash);
      this.stats.full++;
      return { text: res.bodyText, check: async () => true };
    }
    const d = res?.bodyDelta;
    if (!d || typeof d !== 'object') return undefined;
    const text = d.since === snap.hash ? applyBodyDelta(snap.text, d.ops, res.bodyLength) : null;
    if (text === null) {
      this.stats.rejected++;
      return null;
    }
    this.#keep(text, res.bodyHash);
    this.stats.delta++;
    let verdict = null;
    const verify = async () => {
      let ok = false;
      try {
        ok = (await textHash(text, this.subtle)) === res.bodyHash;
      } catch {
        ok = false;
      }
      if (!ok) {
        this.stats.rejected++;
        if (this.text === text) this.forget();
      }
      return ok;
    };
    return { text, check: () => (verdict ??= verify()) };
  }

  #keep(text, hash) {
    if (typeof hash !== 'string') return;
    this.text = text;
    this.hash = hash;
  }
}
