// Statistics and output of the benchmark: medians and spreads, the one results table (plain text
// for the terminal, Markdown for BENCHMARKS.md), the send-latency chart and the scale sweep's
// log-log chart as hand-written SVG.

/**
 * Median, min and max of a list of numbers (nulls ignored).
 * @param {number[]} xs
 * @returns {{median: number, min: number, max: number, n: number}|null}
 */
export function summarize(xs) {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const mid = v.length >> 1;
  const median = v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
  return { median, min: v[0], max: v.at(-1), n: v.length };
}

/**
 * A value with its unit, short: `12.3 ms`, `41.0 KiB`, `63.2 MiB`.
 * @param {number|null|undefined} x
 * @param {'ms'|'bytes'|'MB/s'} unit
 */
export function fmt(x, unit) {
  if (x == null || !Number.isFinite(x)) return '–';
  if (unit === 'MB/s') return `${x.toFixed(1)} MB/s`;
  if (unit === 'bytes') {
    if (x >= 1024 * 1024) return `${(x / 1024 / 1024).toFixed(1)} MiB`;
    if (x >= 1024) return `${(x / 1024).toFixed(1)} KiB`;
    return `${Math.round(x)} B`;
  }
  if (x >= 100) return `${Math.round(x)} ms`;
  if (x >= 10) return `${x.toFixed(1)} ms`;
  return `${x.toFixed(2)} ms`;
}

function spread(s, unit) {
  return s ? `${fmt(s.min, unit)} – ${fmt(s.max, unit)}` : '–';
}

/**
 * One table row from the samples of a scenario.
 * @param {object} o
 * @param {string} o.scenario
 * @param {number[]} o.keepsake samples
 * @param {number[]} [o.baseline] samples (absent: an absolute row)
 * @param {'ms'|'bytes'|'MB/s'} [o.unit]
 * @param {string} o.target text shown
 * @param {(r: {ks: object, base: object|null, ratio: number|null}) => boolean|null} o.met
 * @returns {object}
 */
export function row({ scenario, keepsake, baseline = null, unit = 'ms', target, met }) {
  const ks = summarize(keepsake);
  const base = baseline ? summarize(baseline) : null;
  const ratio = ks && base && base.median > 0 ? ks.median / base.median : null;
  const ok = ks ? met({ ks, base, ratio }) : null;
  return {
    scenario,
    keepsake: fmt(ks?.median, unit),
    baseline: base ? fmt(base.median, unit) : '–',
    ratio: ratio == null ? '–' : ratio < 0.01 ? ratio.toExponential(1) : ratio.toFixed(3),
    ksSpread: spread(ks, unit),
    baseSpread: base ? spread(base, unit) : '–',
    rounds: `${ks?.n ?? 0}${base ? `/${base.n}` : ''}`,
    target,
    met: ok == null ? '–' : ok ? 'yes' : 'NO',
  };
}

const COLUMNS = [
  ['scenario', 'Scenario'],
  ['keepsake', 'Keepsake median'],
  ['baseline', 'Baseline median'],
  ['ratio', 'Ratio'],
  ['ksSpread', 'Keepsake min–max'],
  ['baseSpread', 'Baseline min–max'],
  ['rounds', 'Rounds'],
  ['target', 'Target'],
  ['met', 'Met?'],
];

/**
 * "a–b unit" of the values over rounds (one value alone when they agree once formatted), each
 * number formatted by `f`; "–" when there is none.
 * @param {number[]} values
 * @param {[(x: number) => string, string]} format the formatter and the unit
 */
export function range(values, [f, unit]) {
  const v = values.filter((x) => Number.isFinite(x));
  if (!v.length) return '–';
  const lo = f(Math.min(...v));
  const hi = f(Math.max(...v));
  return lo === hi ? `${lo} ${unit}` : `${lo}–${hi} ${unit}`;
}

/** The rows as an aligned plain-text table. */
export function textTable(rows, columns = COLUMNS) {
  const width = columns.map(([k, h]) => Math.max(h.length, ...rows.map((r) => String(r[k]).length)));
  const line = (cells) => cells.map((c, i) => String(c).padEnd(width[i])).join(' | ');
  return [line(columns.map(([, h]) => h)), width.map((w) => '-'.repeat(w)).join('-|-'), ...rows.map((r) => line(columns.map(([k]) => r[k])))].join('\n');
}

/** The rows as a Markdown table. */
export function markdownTable(rows, columns = COLUMNS) {
  const esc = (s) => String(s).replaceAll('|', '\\|');
  return [
    `| ${columns.map(([, h]) => h).join(' | ')} |`,
    `|${columns.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${columns.map(([k]) => esc(r[k])).join(' | ')} |`),
  ].join('\n');
}

/**
 * A line chart as SVG text: `series` = [{name, color, dash?, points: [[x, y], …]}].
 * @param {{title: string, xLabel: string, yLabel: string, series: object[]}} o
 * @returns {string}
 */
export function lineChart({ title, xLabel, yLabel, series }) {
  const W = 720;
  const H = 420;
  const m = { l: 70, r: 200, t: 40, b: 50 };
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1]));
  const xMax = Math.max(...xs);
  const yTop = niceCeil(Math.max(...ys));
  const px = (x) => m.l + (x / xMax) * (W - m.l - m.r);
  const py = (y) => H - m.b - (y / yTop) * (H - m.t - m.b);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2 - m.r / 2}" y="22" text-anchor="middle" font-size="15">${escapeXml(title)}</text>`,
  ];
  for (let i = 0; i <= 5; i++) {
    const y = (yTop * i) / 5;
    out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${py(y)}" y2="${py(y)}" stroke="#ddd"/>`);
    out.push(`<text x="${m.l - 6}" y="${py(y) + 4}" text-anchor="end">${Math.round(y)}</text>`);
  }
  for (const x of [...new Set(xs)].sort((a, b) => a - b)) {
    out.push(`<text x="${px(x)}" y="${H - m.b + 18}" text-anchor="middle">${x}</text>`);
  }
  out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}" stroke="#333"/>`);
  out.push(`<line x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${H - m.b}" stroke="#333"/>`);
  out.push(`<text x="${(m.l + W - m.r) / 2}" y="${H - 12}" text-anchor="middle">${escapeXml(xLabel)}</text>`);
  out.push(`<text transform="translate(18 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle">${escapeXml(yLabel)}</text>`);
  series.forEach((s, i) => {
    const pts = s.points.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : '';
    out.push(`<polyline points="${pts}" fill="none" stroke="${s.color}" stroke-width="2"${dash}/>`);
    for (const [x, y] of s.points) out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${s.color}"/>`);
    const ly = m.t + 10 + i * 22;
    out.push(`<line x1="${W - m.r + 14}" x2="${W - m.r + 40}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`);
    out.push(`<text x="${W - m.r + 46}" y="${ly + 4}">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/**
 * A log-log line chart as SVG text (both axes powers of ten): `series` = [{name, color, dash?,
 * points: [[x, y], …]}] with x, y > 0. A straight line of slope k means time ∝ size^k.
 * @param {{title: string, xLabel: string, yLabel: string, series: object[]}} o
 * @returns {string}
 */
export function logLogChart({ title, xLabel, yLabel, series }) {
  const W = 860;
  const H = 480;
  const m = { l: 70, r: 330, t: 40, b: 50 };
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1]));
  const x0 = Math.floor(Math.log10(Math.min(...xs)));
  const x1 = Math.ceil(Math.log10(Math.max(...xs)));
  const y0 = Math.floor(Math.log10(Math.min(...ys)));
  const y1 = Math.max(y0 + 1, Math.ceil(Math.log10(Math.max(...ys))));
  const px = (x) => m.l + ((Math.log10(x) - x0) / Math.max(1, x1 - x0)) * (W - m.l - m.r);
  const py = (y) => H - m.b - ((Math.log10(y) - y0) / (y1 - y0)) * (H - m.t - m.b);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${(m.l + W - m.r) / 2}" y="22" text-anchor="middle" font-size="15">${escapeXml(title)}</text>`,
  ];
  const label = (v) => (v >= 1 ? v.toLocaleString('en-US') : String(v));
  for (let e = y0; e <= y1; e++) {
    const y = 10 ** e;
    out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${py(y).toFixed(1)}" y2="${py(y).toFixed(1)}" stroke="#ddd"/>`);
    out.push(`<text x="${m.l - 6}" y="${(py(y) + 4).toFixed(1)}" text-anchor="end">${label(y)}</text>`);
  }
  for (let e = x0; e <= x1; e++) {
    const x = 10 ** e;
    out.push(`<line x1="${px(x).toFixed(1)}" x2="${px(x).toFixed(1)}" y1="${m.t}" y2="${H - m.b}" stroke="#eee"/>`);
    out.push(`<text x="${px(x).toFixed(1)}" y="${H - m.b + 18}" text-anchor="middle">${label(x)}</text>`);
  }
  for (const x of [...new Set(xs)].filter((x) => !Number.isInteger(Math.log10(x)))) {
    out.push(`<text x="${px(x).toFixed(1)}" y="${H - m.b + 32}" text-anchor="middle" fill="#666">${label(x)}</text>`);
  }
  out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}" stroke="#333"/>`);
  out.push(`<line x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${H - m.b}" stroke="#333"/>`);
  out.push(`<text x="${(m.l + W - m.r) / 2}" y="${H - 6}" text-anchor="middle">${escapeXml(xLabel)} (log)</text>`);
  out.push(`<text transform="translate(18 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle">${escapeXml(yLabel)} (log)</text>`);
  series.forEach((s, i) => {
    const pts = s.points.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : '';
    out.push(`<polyline points="${pts}" fill="none" stroke="${s.color}" stroke-width="2"${dash}/>`);
    for (const [x, y] of s.points) out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${s.color}"/>`);
    const ly = m.t + 8 + i * 20;
    out.push(`<line x1="${W - m.r + 14}" x2="${W - m.r + 40}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`);
    out.push(`<text x="${W - m.r + 46}" y="${ly + 4}">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function niceCeil(y) {
  if (y <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(y));
  for (const k of [1, 2, 2.5, 5, 10]) if (k * p >= y) return k * p;
  return 10 * p;
}

function escapeXml(s) {
  return String(s).replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}
