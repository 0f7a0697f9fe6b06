// The scale sweep (./bench.sh's "Scale" block; alone: `BENCH_ONLY=scale ./bench.sh`, printed
// only): the same jobs at 100 → 1,000 → 10,000 saved sessions, Keepsake side by side with the
// in-browser way (chrome.storage.local, bench/ext/baseline.js) wherever the in-browser way can
// hold the data. Per size: the data set (bench/ext/scale-gen.js: mixed English/Chinese text, one
// distinct generated picture in 10 % of the sessions, and one 100-entry session with pictures)
// goes into a fresh database with `keepsake-host import` (release binary, timed) and into
// chrome.storage.local of a fresh profile (timed, with a cap); then interleaved rounds of the
// drawer's first page, search with 1, 2 and 5 characters, loading the 100-entry session, host
// start and the panel showing that session; `keepsake-host backup` timed; disk use and the host's
// peak RSS; everything of the size deleted before the next. Growth: t(top)/t(middle) and the slope
// of log t against log sessions between them, against the issue's targets.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';

import { SEARCH_QUERIES } from './ext/gen.js';
import { BIG, ENTRY_CHARS, PAGE, PICTURE_EVERY, SESSION_CHARS, bigPictures, bigSession, pictureOf, scaleSession } from './ext/scale-gen.js';
import { screenshotPng } from './inputs.mjs';
import { peakRss } from './procfs.mjs';
import { fmt, logLogChart, markdownTable, summarize, textTable } from './report.mjs';

/**
 * The e2e harness (Chromium through playwright-core), loaded when the sweep runs, so the report
 * functions below work without it (bench/scale.test.mjs).
 */
let H = null;
/** bench/panel-probe.mjs, loaded with the harness. */
let P = null;

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const IMAGE_REF_PREFIX = 'keepsake-image:sha256:';
const DISK_LIMIT = 8 * GiB;

/** Sizes, rounds (after one warm-up round) and picture sizes; BENCH_QUICK=1: small, for development. */
export const SCALE_CFG =
  process.env.BENCH_QUICK === '1'
    ? { sizes: [30, 100, 300], rounds: { 30: 2, 100: 2, 300: 2 }, warmup: 1, pictureBytes: 200_000, bigPictureBytes: 500_000, baselineCapMs: 60_000 }
    : { sizes: [100, 1000, 10_000], rounds: { 100: 7, 1000: 7, 10_000: 4 }, warmup: 1, pictureBytes: 200_000, bigPictureBytes: 500_000, baselineCapMs: 240_000 };

const log = (...a) => console.error(`[bench scale ${new Date().toISOString().slice(11, 19)}]`, ...a);
const WAYS = ['keepsake', 'baseline'];
const orderOf = (r) => (r % 2 ? [...WAYS].reverse() : WAYS);

/** The measures, in table order. `unit` ms unless said; `target` on the Keepsake row's growth. */
const MEASURES = [
  { id: 'list', label: `Drawer list (first ${PAGE} rows)`, target: 'growth ≤ 2×', factorMax: 2 },
  ...SEARCH_QUERIES.map(({ q, label }) => ({ id: `search:${q}`, label: `Search ${label} "${q}"`, target: 'growth ≤ 2×', factorMax: 2 })),
  { id: 'load', label: `Load the ${BIG.count}-entry session (pictures)`, target: 'growth ≤ 2×', factorMax: 2 },
  { id: 'paint', label: 'Panel: first text paint of it', target: '–' },
  { id: 'images', label: 'Panel: its pictures shown', target: '–' },
  { id: 'hello', label: 'Host start: spawn → hello', target: 'growth ≤ 1.2×', factorMax: 1.2, keepsakeOnly: true },
  { id: 'meta', label: 'Host start: spawn → first history.meta', target: 'growth ≤ 1.2×', factorMax: 1.2, keepsakeOnly: true },
  { id: 'import', label: 'Import (host: keepsake-host import; browser: storage writes)', target: '–', once: true },
  { id: 'backup', label: 'keepsake-host backup', target: '–', keepsakeOnly: true, once: true },
  { id: 'dbBytes', label: 'Stored size (database + -wal; browser: its LevelDB)', unit: 'bytes', target: '–', once: true },
  { id: 'rss', label: 'Host peak RSS (VmHWM) during the size', unit: 'bytes', target: '≤ 256 MiB at every size', rssMax: 256 * MiB, keepsakeOnly: true, once: true },
];

// ---- data -----------------------------------------------------------------------------------------

function dirBytes(dir) {
  let n = 0;
  if (!fs.existsSync(dir)) return 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    n += e.isDirectory() ? dirBytes(p) : e.isFile() ? fs.statSync(p).size : 0;
  }
  return n;
}
const fileBytes = (f) => (fs.existsSync(f) ? fs.statSync(f).size : 0);

/**
 * The size's pictures as files in the test build (`bench/scale/<name>.png`, where the worker
 * fetches them): one distinct seeded PNG per picture session, BIG.pictures bigger ones for the
 * 100-entry session. → name → {sha, bytes}
 */
function writePictures(dir, count) {
  fs.mkdirSync(dir, { recursive: true });
  const out = new Map();
  const put = (name, seed, bytes, width, height) => {
    const png = screenshotPng({ seed, bytes, width, height });
    fs.writeFileSync(path.join(dir, `${name}.png`), png);
    out.set(name, { sha: crypto.createHash('sha256').update(png).digest('hex'), bytes: png.length });
  };
  for (let i = 0; i < count; i += PICTURE_EVERY) put(pictureOf(i), 50_000 + i, SCALE_CFG.pictureBytes, 1280, 720);
  bigPictures().forEach((name, k) => put(name, 40_000 + k, SCALE_CFG.bigPictureBytes, 1920, 1080));
  return out;
}

/** The JSON export of the size's sessions and pictures (streamed), for `keepsake-host import`. */
function writeExport(file, count, pics, picDir) {
  const fd = fs.openSync(file, 'w');
  const ref = (name) => `${IMAGE_REF_PREFIX}${pics.get(name).sha}`;
  try {
    fs.writeSync(fd, '{"format":"keepsake.sessions","version":1,"exportedAt":"2026-12-03T00:00:00+00:00","sessions":[');
    for (let i = 0; i < count; i++) fs.writeSync(fd, (i ? ',' : '') + JSON.stringify(scaleSession(i, ref)));
    fs.writeSync(fd, `,${JSON.stringify(bigSession(count, ref))}],"images":{`);
    let first = true;
    for (const [name, { sha }] of pics) {
      const data = fs.readFileSync(path.join(picDir, `${name}.png`)).toString('base64');
      fs.writeSync(fd, `${first ? '' : ','}"${sha}":{"mime":"image/png","data":"${data}"}`);
      first = false;
    }
    fs.writeSync(fd, '}}');
  } finally {
    fs.closeSync(fd);
  }
}

// ---- the panel ------------------------------------------------------------------------------------

/** The real side panel (Keepsake) or bench/panel.html (baseline) showing the live history: first paints. */
async function timePanel(k, way, expect) {
  P ??= await import('./panel-probe.mjs');
  const m = await P.timePanel(k, way, expect, { gotoMs: 60_000, waitMs: 120_000 });
  return { paint: m.text, images: m.images };
}

// ---- one size -------------------------------------------------------------------------------------

function scaleCall(k, fn, ...args) {
  return H.withTimeout(k.worker.evaluate(([f, a]) => self.__scale[f](...a), [fn, args]), 900_000, `__scale.${fn}`);
}

async function oneSize(testBuild, count) {
  const t0 = Date.now();
  const rounds = SCALE_CFG.rounds[count];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-bench-scale-'));
  const picDir = path.join(testBuild, 'bench', 'scale');
  const db = path.join(dataDir, 'keepsake.db');
  const doc = path.join(dataDir, 'sessions.json');
  const backup = path.join(dataDir, 'backup.db');
  const out = { count, rounds, samples: {}, facts: {} };
  const put = (id, way, v) => ((out.samples[id] ??= { keepsake: [], baseline: [] })[way].push(v));
  try {
    let t = Date.now();
    const pics = writePictures(picDir, count);
    writeExport(doc, count, pics, picDir);
    const F = out.facts;
    F.genMs = Date.now() - t;
    F.pictures = pics.size;
    F.pictureBytes = [...pics.values()].reduce((n, p) => n + p.bytes, 0);
    F.docBytes = fileBytes(doc);
    log(`${count}: ${count + 1} sessions, ${pics.size} pictures (${(F.pictureBytes / MiB).toFixed(1)} MiB), export ${(F.docBytes / MiB).toFixed(1)} MiB in ${F.genMs} ms`);
    t = Date.now();
    execFileSync(H.HOST_BIN, ['--db', db, 'import', doc], { stdio: ['ignore', 'ignore', 'inherit'] });
    const importMs = Date.now() - t;
    put('import', 'keepsake', importMs);
    F.importMBs = F.docBytes / 1e6 / (importMs / 1000);
    execFileSync('sync');
    const disk = { exportJson: F.docBytes, pictures: dirBytes(picDir), db: fileBytes(db), wal: fileBytes(`${db}-wal`) };
    fs.rmSync(doc);
    for (let i = 0; i < (count >= 10_000 ? 1 : 3); i++) {
      fs.rmSync(backup, { force: true });
      t = Date.now();
      execFileSync(H.HOST_BIN, ['--db', db, 'backup', backup], { stdio: ['ignore', 'ignore', 'inherit'] });
      put('backup', 'keepsake', Date.now() - t);
    }
    disk.backup = fileBytes(backup);
    fs.rmSync(backup);
    log(`${count}: imported in ${importMs} ms (${F.importMBs.toFixed(1)} MB/s), backup ${out.samples.backup.keepsake.map((x) => `${x} ms`).join(', ')}`);

    const k = await H.launch({ name: `bench-scale-${count}`, extDir: testBuild, dataDir });
    try {
      const fill = await scaleCall(k, 'fill', { count, capMs: SCALE_CFG.baselineCapMs });
      F.baseline = fill;
      const leveldb = path.join(k.profileDir, 'Default', 'Local Extension Settings', H.EXT_ID);
      disk.leveldb = dirBytes(leveldb);
      if (fill.done) {
        put('import', 'baseline', fill.ms);
        put('dbBytes', 'baseline', disk.leveldb);
        F.baselineMBs = F.docBytes / 1e6 / (fill.ms / 1000);
        log(`${count}: in-browser way written in ${Math.round(fill.ms)} ms (${F.baselineMBs.toFixed(1)} MB/s for the same data), LevelDB ${(disk.leveldb / MiB).toFixed(1)} MiB, digests read back in ${Math.round(fill.digestLoadMs)} ms`);
      } else {
        log(`${count}: the in-browser way could not hold it: ${fill.reason} (${fill.written} of ${count + 1} sessions in ${Math.round(fill.ms)} ms)`);
        await scaleCall(k, 'clear');
      }
      const ways = fill.done ? WAYS : ['keepsake'];
      let rssMax = 0;
      const sampleRss = () => {
        for (const pid of k.hostPids()) {
          try {
            rssMax = Math.max(rssMax, peakRss(pid));
          } catch {
            // the host ended between the listing and the read
          }
        }
      };
      for (let r = 0; r < SCALE_CFG.warmup + rounds; r++) {
        const keep = r >= SCALE_CFG.warmup;
        const order = orderOf(r).filter((w) => ways.includes(w));
        for (const way of order) {
          const v = await scaleCall(k, 'run', 'list', way);
          if (keep) put('list', way, v.ms);
        }
        for (const { q } of SEARCH_QUERIES) {
          for (const way of order) {
            const v = await scaleCall(k, 'run', 'search', way, { query: q });
            if (keep) put(`search:${q}`, way, v.ms);
            if (r === 0) (F.hits ??= {})[`${q}:${way}`] = v.hits;
          }
        }
        for (const way of order) {
          const v = await scaleCall(k, 'run', 'load', way);
          if (keep) put('load', way, v.ms);
        }
        const st = await scaleCall(k, 'run', 'start', 'keepsake');
        if (keep) {
          put('hello', 'keepsake', st.ms);
          put('meta', 'keepsake', st.metaMs);
        }
        for (const way of order) {
          const expect = await scaleCall(k, 'panelReset', way);
          F.panel = expect;
          const v = await timePanel(k, way, expect);
          if (keep) {
            put('paint', way, v.paint);
            put('images', way, v.images);
          }
        }
        sampleRss();
        log(`${count}: round ${r + 1}/${SCALE_CFG.warmup + rounds}${keep ? '' : ' (warm-up)'}`);
      }
      F.listTakesLimit = await scaleCall(k, 'listTakesLimit');
      put('rss', 'keepsake', rssMax);
      disk.db = fileBytes(db);
      disk.wal = fileBytes(`${db}-wal`);
      disk.leveldb = dirBytes(leveldb);
      put('dbBytes', 'keepsake', disk.db + disk.wal);
    } finally {
      await k.close();
    }
    out.disk = disk;
    out.disk.peak = disk.exportJson + disk.pictures + disk.db + disk.wal + disk.backup + disk.leveldb;
    const line = Object.entries(disk)
      .map(([k2, v]) => `${k2} ${(v / MiB).toFixed(1)} MiB`)
      .join(', ');
    log(`${count}: disk use ${line}${out.disk.peak > DISK_LIMIT ? ' — OVER 8 GiB' : ''}`);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(picDir, { recursive: true, force: true });
  }
  out.wallMs = Date.now() - t0;
  log(`${count}: done in ${Math.round(out.wallMs / 1000)} s`);
  return out;
}

/** The whole sweep, size after size (each cleaned up before the next). */
export async function scaleSweep(testBuild) {
  H ??= await import('../tests/e2e/harness.mjs');
  const t0 = Date.now();
  const sizes = [];
  for (const count of SCALE_CFG.sizes) sizes.push(await oneSize(testBuild, count));
  const res = { sizes, wallMs: Date.now() - t0 };
  log(`scale block wall time ${Math.round(res.wallMs / 1000)} s`);
  return res;
}

// ---- report ---------------------------------------------------------------------------------------

const median = (xs) => summarize(xs ?? [])?.median ?? null;

/** Growth of a list of medians (one per size) between the last two sizes: {factor, slope}. */
export function growth(values, sizes = SCALE_CFG.sizes) {
  const a = values.at(-2);
  const b = values.at(-1);
  if (a == null || b == null || !(a > 0)) return { factor: null, slope: null };
  const factor = b / a;
  return { factor, slope: Math.log(factor) / Math.log(sizes.at(-1) / sizes.at(-2)) };
}

/** The table rows: per measure a Keepsake row and an in-browser row. */
export function scaleRows(res) {
  const rows = [];
  const n = (x) => x.toLocaleString('en-US');
  for (const m of MEASURES) {
    for (const way of m.keepsakeOnly ? ['keepsake'] : WAYS) {
      const meds = res.sizes.map((s) => median(s.samples[m.id]?.[way]));
      const g = growth(meds, res.sizes.map((s) => s.count));
      const cells = {};
      res.sizes.forEach((s, i) => {
        const v = meds[i];
        let cell = fmt(v, m.unit ?? 'ms');
        if (v == null && way === 'baseline' && !s.facts.baseline?.done) cell = 'could not hold';
        if (m.id === 'import' && v != null) cell += ` (${(way === 'keepsake' ? s.facts.importMBs : s.facts.baselineMBs).toFixed(1)} MB/s)`;
        cells[`n${n(s.count)}`] = cell;
      });
      let met = '–';
      let target = '–';
      if (way === 'keepsake' && m.factorMax) {
        target = m.target;
        met = g.factor == null ? '–' : g.factor <= m.factorMax ? 'yes' : 'NO';
      }
      if (way === 'keepsake' && m.rssMax) {
        target = m.target;
        met = meds.every((v) => v != null && v <= m.rssMax) ? 'yes' : 'NO';
      }
      rows.push({
        measure: m.label,
        way: way === 'keepsake' ? 'Keepsake' : 'in-browser',
        ...cells,
        factor: g.factor == null ? '–' : `${g.factor.toFixed(2)}×`,
        slope: g.slope == null ? '–' : g.slope.toFixed(2),
        target,
        met,
      });
    }
  }
  return rows;
}

export function scaleColumns(res) {
  const n = (x) => x.toLocaleString('en-US');
  return [
    ['measure', 'Measure'],
    ['way', 'Way'],
    ...res.sizes.map((s) => [`n${n(s.count)}`, `${n(s.count)} sessions`]),
    ['factor', `t(${n(res.sizes.at(-1).count)})/t(${n(res.sizes.at(-2).count)})`],
    ['slope', 'log-log slope'],
    ['target', 'Target'],
    ['met', 'Met?'],
  ];
}

/** The log-log chart of every time measure against the number of sessions (SVG text). */
export function scaleChart(res) {
  const palette = ['#1a73e8', '#188038', '#e37400', '#a142f4', '#d93025', '#12b5cb', '#5f6368', '#b06000', '#000000', '#f538a0'];
  const series = [];
  let c = 0;
  for (const m of MEASURES) {
    if (m.unit === 'bytes' || m.id === 'import' || m.id === 'backup') continue;
    const color = palette[c++ % palette.length];
    for (const way of m.keepsakeOnly ? ['keepsake'] : WAYS) {
      const points = res.sizes.map((s) => [s.count, median(s.samples[m.id]?.[way])]).filter(([, y]) => y != null && y > 0);
      if (points.length) series.push({ name: `${m.label.replace(/ \(.*\)$/, '')}${way === 'baseline' ? ' (in-browser)' : ''}`, color, dash: way === 'baseline' ? '6 4' : undefined, points });
    }
  }
  return logLogChart({ title: 'Scale: median time against saved sessions (log-log)', xLabel: 'saved sessions', yLabel: 'ms', series });
}

function diskLine(s) {
  const d = s.disk ?? {};
  const m = (x) => `${((x ?? 0) / MiB).toFixed(1)} MiB`;
  return `${s.count.toLocaleString('en-US')} sessions: export JSON ${m(d.exportJson)}, pictures ${m(d.pictures)}, database ${m(d.db)}, -wal ${m(d.wal)}, backup ${m(d.backup)}, chrome.storage.local LevelDB ${m(d.leveldb)}; ${m(d.peak)} in all (an upper bound of what was on disk at once; limit 8 GiB); wall ${Math.round(s.wallMs / 1000)} s`;
}

function baselineLine(s) {
  const b = s.facts.baseline;
  const n = s.count.toLocaleString('en-US');
  if (!b) return `${n}: –`;
  if (b.done) return `${n}: held (${b.written} sessions written in ${Math.round(b.ms)} ms, digests read back in ${Math.round(b.digestLoadMs)} ms)`;
  return `${n}: **could not hold the data** — ${b.reason} after ${b.written} of ${s.count + 1} sessions (${Math.round(b.ms)} ms)`;
}

/** Printed after the sweep (BENCH_ONLY=scale and the full run). */
export function printScale(res) {
  console.log('');
  console.log(`Scale sweep (${SCALE_CFG.sizes.join(' → ')} sessions; wall ${Math.round(res.wallMs / 1000)} s)${process.env.BENCH_QUICK === '1' ? ' — BENCH_QUICK (small sizes, not for publishing)' : ''}`);
  console.log(textTable(scaleRows(res), scaleColumns(res)));
  console.log('Disk use:');
  for (const s of res.sizes) console.log(`  ${diskLine(s)}`);
  console.log('In-browser way:');
  for (const s of res.sizes) console.log(`  ${baselineLine(s)}`);
}

/**
 * What separate measurements showed for the growth targets missed so far (2026-12-06, same machine;
 * not figures of this run). Shown for a measure only while its Keepsake row misses its target.
 */
const SCALE_NOTES = [
  {
    measure: /^(Drawer list|Search)/,
    text: `A page is 50 rows (\`sessions.list {limit: 50}\` → \`{rows, total, cursor}\`; before paging, 10,000 rows in a
  1.2 MB reply at 10,000 sessions and 2,509 hits for 鲸 in 752 KB). The host keeps a copy of the drawer (every saved
  session's row, lower-cased name and index document) between calls and reads it again after a write; in each
  round the list and searches come right after the round's writes. A node client on the pipes (\`bench/drawer-pipes.mjs\`, release host,
  text-only databases of this generator, 2026-12-06 20:40 while a CI run shared the cores), 1,000 / 10,000 sessions:
  before, \`sessions.list {limit: 50}\` right after a \`history.append\` took 3.8–8.2 / 75–115 ms (the whole copy read
  again along the \`sessions_order\` index, with each row's JSON made); now a plain list's page after a write is read
  alone along that index (0.5–0.8 / 0.9–1.3 ms), and the copy a search needs is read in the table's order and sorted
  in memory, JSON made only for the rows sent (the first search after a write 1.6–3.7 / 12–17 ms, was ~23–27 ms at
  10,000; with no write between, 0.5 / 1.0–1.3 ms). So what still grows is that one read per write, linear in the
  number of sessions; searches longer than two characters also check every candidate's text for an exact total
  (quill). Growth ≤ 2× for searches right after a write needs the copy refreshed from the change log (which names
  the sessions a write touched) instead of read again whole — not done.`,
  },
  {
    measure: /^Host start/,
    text: `Before hello came before the database open, at pipe level (a node client spawning the release host on text-only databases of 1,000 and 10,000 sessions,
  39 and 382 MiB, 21 interleaved starts each) spawn → hello was 9.82 → 12.07 ms (1.23×) and → the first \`history.meta\`
  10.05 → 12.30 ms (1.22×): the host's own start grows 1.22–1.23×, at the edge of the 1.2× target; the browser rows
  add Chromium's own ~10 ms and come from 4–7 rounds on a machine other builds were using. The first \`sessions.list\` after a start is what
  grows there: 7.3 → 106 ms (14×), the drawer's whole read.`,
  },
];

function scaleNotes(rows) {
  const missed = SCALE_NOTES.filter((n) => rows.some((r) => r.way === 'Keepsake' && n.measure.test(r.measure) && r.met === 'NO'));
  if (!missed.length) return '';
  return `**Where a growth target is missed: what separate measurements show.**

${missed.map((n) => `- ${n.text}`).join('\n')}

`;
}

/** The "Scale" section of BENCHMARKS.md. */
export function scaleSection(res) {
  const n = (x) => x.toLocaleString('en-US');
  const S = res.sizes;
  const topS = S.at(-1);
  const limit = S.some((s) => s.facts.listTakesLimit) ? `\`{limit: ${PAGE}}\` (the host pages the drawer)` : `no \`limit\` (this host returns every row; the first ${PAGE} are kept)`;
  return `## Scale

The same jobs at ${S.map((s) => n(s.count)).join(' → ')} saved sessions (\`bench/scale.mjs\`; alone:
\`BENCH_ONLY=scale ./bench.sh\`; the block's wall time in this run: ${Math.round(res.wallMs / 1000)} s). Medians over interleaved rounds
(${S.map((s) => `${s.rounds} at ${n(s.count)}`).join(', ')}, after one warm-up round); times are noisy (2 shared cores).
Growth = t(${n(S.at(-1).count)}) / t(${n(S.at(-2).count)}) and the log-log slope between them (0 = flat, 1 = linear in the number of sessions).

${markdownTable(scaleRows(res), scaleColumns(res))}

${scaleNotes(scaleRows(res))}![Median time against saved sessions, log-log](docs/bench/scale.svg)

**Data set** (\`bench/ext/scale-gen.js\`, seeded, built the same way by node and by the worker): every saved session
holds ${SESSION_CHARS / 1000}K chars of mixed English/Chinese text in ${SESSION_CHARS / ENTRY_CHARS} entries (the body size that keeps the
${n(topS.count)}-session run practical: ${(topS.facts.docBytes / MiB).toFixed(0)} MiB of export JSON), and every ${PICTURE_EVERY}th session one distinct generated
screenshot (~${SCALE_CFG.pictureBytes / 1000} KB PNG, 1280×720) — ${n(topS.facts.pictures)} pictures, ${(topS.facts.pictureBytes / MiB).toFixed(0)} MiB at ${n(topS.count)} sessions, not the ~2 GB the
issue allows: \`keepsake-host import\` ran at ~${topS.facts.importMBs.toFixed(1)} MB/s here, so ~2.7 GB of base64 pictures would take
~${Math.round(2700 / topS.facts.importMBs / 60)} min to import alone, and the in-browser way as long again, past the sweep's 15-minute budget. Plus, at every size, one ${BIG.count}-entry session (${BIG.chars} chars an entry) with
${BIG.pictures} pictures of ~${SCALE_CFG.bigPictureBytes / 1000} KB, the newest session. Searches find 鲸 / 琥珀 / quill in ~25 / 10 / 5 % of the sessions.

**How.** Per size: the JSON export is generated, imported into a fresh database with the release
\`keepsake-host import\` (timed; MB/s = export bytes / time), backed up with \`keepsake-host backup\` (timed: ${S.map((s) => s.samples.backup?.keepsake.length ?? 0).join(' / ')}
runs), then a fresh Chromium profile with the test build (as scenario 8) writes the same sessions into chrome.storage.local the
in-browser way (\`session_<id>\` bodies with pictures as data URLs and \`digest_<id>\` digests in batches of 25, then the
\`savedSessions\` and \`digestIndex\` indexes; cap ${Math.round(SCALE_CFG.baselineCapMs / 1000)} s; its row "Import" is that time, MB/s for the same data).
In the worker (\`bench/ext/scale.js\`): drawer list = \`sessions.list\` with ${limit} vs the index read, sorted and cut;
search = \`sessions.list({query})\` vs scenario 8's digest scan in memory; load = \`sessions.load\` + \`history.get\`
(image references) of the ${BIG.count}-entry session, as the worker's \`chat.loadSession\` and the panel's read after it do, vs its body read, trimmed (§4.1) and
written as the live history, read back; host start = a fresh \`NativePort\` (the real client): spawn → \`host.hello\`
and → the first \`history.meta\` reply. Panel = the real side panel (Keepsake) or bench/panel.html (in-browser)
opened on that session made live (${topS.facts.panel?.bubbles ?? '?'} entries after the trim rule, ${topS.facts.panel?.images ?? '?'} pictures): first text paint and all
its pictures shown, as scenario 6. Stored size = database + -wal after the rounds, and the extension's LevelDB
directory. Peak RSS = the highest VmHWM of any keepsake-host under the browser, read after every round.

**Disk use** per size (everything of a size is deleted before the next):

${S.map((s) => `- ${diskLine(s)}`).join('\n')}

**The in-browser way's copy** (where it could not hold the data, that is its result):

${S.map((s) => `- ${baselineLine(s)}`).join('\n')}

`;
}
