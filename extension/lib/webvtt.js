// WebVTT caption tracks (a `<track>` of a page's `<video>`) read into cues, and the timestamped
// transcript a model is sent: one line per cue, `[mm:ss] text` (`[h:mm:ss]` past an hour), so its
// replies can cite moments the side panel turns into seek pills (lib/pills.js reads the same
// stamps). Pure module, no regular expressions (cue text is page text): string scanning only.

/** Cues kept from one track (a longer track is cut here; the transcript says so). */
export const MAX_CUES = 20_000;

/**
 * A WebVTT timestamp (`hh:mm:ss.ttt` or `mm:ss.ttt`) in seconds, or null.
 * @param {string} s
 */
export function parseVttTime(s) {
  const t = String(s ?? '').trim();
  const parts = t.split(':');
  if (parts.length !== 2 && parts.length !== 3) return null;
  const [secs, frac = ''] = parts[parts.length - 1].split('.');
  if (secs.length !== 2 || frac.length !== 3 || !digits(secs) || !digits(frac)) return null;
  const mins = parts[parts.length - 2];
  if (mins.length !== 2 || !digits(mins) || Number(mins) > 59 || Number(secs) > 59) return null;
  const hours = parts.length === 3 ? parts[0] : '0';
  if (hours.length < 1 || !digits(hours)) return null;
  return Number(hours) * 3600 + Number(mins) * 60 + Number(secs) + Number(frac) / 1000;
}

function digits(s) {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return s.length > 0;
}

const ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', lrm: '', rlm: '' };

/** Cue text without its tags (`<v Ann>`, `<i>`, `<00:01.000>` …), entities decoded, lines joined. */
export function cueText(payload) {
  const s = String(payload ?? '');
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '<') {
      const close = s.indexOf('>', i + 1);
      if (close < 0) break; // an unclosed tag runs to the end of the cue
      i = close;
    } else if (c === '&') {
      const semi = s.indexOf(';', i + 1);
      const name = semi > i && semi - i <= 10 ? s.slice(i + 1, semi) : null;
      let ch = null;
      if (name && Object.hasOwn(ENTITIES, name)) ch = ENTITIES[name];
      else if (name && name[0] === '#') {
        const hex = name[1] === 'x' || name[1] === 'X';
        const n = Number.parseInt(name.slice(hex ? 2 : 1), hex ? 16 : 10);
        if (Number.isInteger(n) && n > 0 && n <= 0x10ffff) ch = String.fromCodePoint(n);
      }
      if (ch === null) out += c;
      else {
        out += ch;
        i = semi;
      }
    } else out += c === '\n' || c === '\t' ? ' ' : c;
  }
  return out.split(' ').filter(Boolean).join(' ');
}

/**
 * The cues of a WebVTT file, in file order: `{start, end, text}` (seconds; text without tags).
 * A file that does not start with `WEBVTT` gives `{cues: [], error}`; a block whose timing line
 * does not parse is skipped (as browsers do).
 * @param {string} text
 * @returns {{cues: {start: number, end: number, text: string}[], truncated: boolean, error?: string}}
 */
export function parseWebVtt(text) {
  let s = String(text ?? '');
  if (s.charCodeAt(0) === 0xfeff) s = s.slice(1);
  s = s.split('\r\n').join('\n').split('\r').join('\n');
  const first = s.slice(0, s.indexOf('\n') < 0 ? s.length : s.indexOf('\n'));
  if (!(first === 'WEBVTT' || first.startsWith('WEBVTT ') || first.startsWith('WEBVTT\t'))) {
    return { cues: [], truncated: false, error: 'not a WebVTT file (no WEBVTT line)' }; // i18n-ok: diagnostic for callers; never shown (page-attach reads only the cues)
  }
  const cues = [];
  let truncated = false;
  for (const block of s.split('\n\n').slice(1)) {
    const lines = block.split('\n').filter((l, i, all) => i > 0 || l !== '' || all.length === 1);
    const at = lines.findIndex((l) => l.includes('-->'));
    if (at < 0 || at > 1) continue; // NOTE, STYLE, REGION, or not a cue
    const [from, rest = ''] = lines[at].split('-->');
    const start = parseVttTime(from);
    const end = parseVttTime(rest.trim().split(' ')[0]);
    if (start === null || end === null) continue;
    const t = cueText(lines.slice(at + 1).join('\n'));
    if (!t) continue;
    if (cues.length >= MAX_CUES) {
      truncated = true;
      break;
    }
    cues.push({ start, end, text: t });
  }
  return { cues, truncated };
}

/** `[mm:ss]`, or `[h:mm:ss]` from an hour on (whole seconds, rounded down). */
export function stamp(seconds) {
  const t = Math.max(0, Math.floor(seconds));
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const sec = t % 60;
  const two = (n) => String(n).padStart(2, '0');
  return h ? `[${h}:${two(m)}:${two(sec)}]` : `[${two(m)}:${two(sec)}]`;
}

/**
 * The transcript of a track: one `[mm:ss] text` line per cue, in time order; a cue that repeats
 * the previous one's text (rolling captions) is not written again.
 * @param {{start: number, text: string}[]} cues
 */
export function transcriptLines(cues) {
  const sorted = [...cues].sort((a, b) => a.start - b.start);
  const out = [];
  let last = null;
  for (const c of sorted) {
    if (c.text === last) continue;
    out.push(`${stamp(c.start)} ${c.text}`);
    last = c.text;
  }
  return out.join('\n');
}
