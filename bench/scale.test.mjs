// The scale sweep's report arithmetic (node --test bench/scale.test.mjs): growth factors and
// slopes, the rows' targets and "could not hold", the log-log chart. No browser, no timing.

import assert from 'node:assert/strict';
import test from 'node:test';

import { growth, scaleChart, scaleColumns, scaleRows } from './scale.mjs';
import { logLogChart } from './report.mjs';

test('growth: factor and log-log slope between the last two sizes', () => {
  const g = growth([5, 10, 20], [100, 1000, 10_000]);
  assert.equal(g.factor, 2);
  assert.ok(Math.abs(g.slope - Math.log10(2)) < 1e-12);
  assert.deepEqual(growth([5, null, 20], [100, 1000, 10_000]), { factor: null, slope: null });
  assert.ok(Math.abs(growth([1, 3], [100, 300]).slope - 1) < 1e-12, 'linear growth has slope 1');
});

/** A sweep result of three sizes; the in-browser way could not hold the top one. */
function sweep(sizes, ms) {
  return {
    wallMs: 1000,
    sizes: sizes.map((count, i) => {
      const done = i < sizes.length - 1;
      const both = (k, b) => ({ keepsake: k, baseline: done ? b : [] });
      return {
        count,
        rounds: 3,
        wallMs: 100,
        facts: { importMBs: 10, baselineMBs: 5, baseline: done ? { done: true } : { done: false, reason: 'time cap' }, docBytes: 1, pictures: 1, pictureBytes: 1 },
        samples: {
          list: both([ms[i], ms[i], ms[i]], [1, 1, 1]),
          'search:鲸': both([1], [1]),
          hello: both([10 * (i + 1)], []),
          rss: both([300 * 1024 * 1024], []),
          import: both([100], [200]),
        },
      };
    }),
  };
}

test('scaleRows: targets on the Keepsake rows, "could not hold" where the in-browser way failed', () => {
  const res = sweep([100, 1000, 10_000], [1, 2, 5]);
  const rows = scaleRows(res);
  const cols = scaleColumns(res).map(([k]) => k);
  assert.ok(cols.includes('n10,000') && cols.includes('factor') && cols.includes('slope'));
  const list = rows.find((r) => r.measure.startsWith('Drawer list') && r.way === 'Keepsake');
  assert.equal(list.factor, '2.50×');
  assert.equal(list.slope, '0.40');
  assert.equal(list.target, 'growth ≤ 2×');
  assert.equal(list.met, 'NO');
  const listBase = rows.find((r) => r.measure.startsWith('Drawer list') && r.way === 'in-browser');
  assert.equal(listBase['n10,000'], 'could not hold');
  assert.equal(listBase.met, '–');
  const hello = rows.find((r) => r.measure.includes('spawn → hello'));
  assert.equal(hello.factor, '1.50×');
  assert.equal(hello.met, 'NO', 'host start may grow by 1.2× at most');
  const rss = rows.find((r) => r.measure.startsWith('Host peak RSS'));
  assert.equal(rss.met, 'NO', '300 MiB is over 256 MiB');
  const imp = rows.find((r) => r.measure.startsWith('Import') && r.way === 'Keepsake');
  assert.match(imp.n100, /MB\/s/);
});

test('logLogChart: one polyline per series, decade grid labels, log axes', () => {
  const svg = logLogChart({
    title: 't',
    xLabel: 'sessions',
    yLabel: 'ms',
    series: [
      { name: 'a', color: '#000', points: [[100, 1], [1000, 10], [10_000, 100]] },
      { name: 'b & c', color: '#111', dash: '6 4', points: [[100, 5], [10_000, 5]] },
    ],
  });
  assert.equal(svg.match(/<polyline /g).length, 2);
  for (const label of ['>100<', '>1,000<', '>10,000<', '>1<', '>10<']) assert.ok(svg.includes(label), label);
  assert.ok(svg.includes('b &amp; c'));
  // slope 1 in both logs: equal steps in x and y for each decade
  const pts = /<polyline points="([^"]+)"/.exec(svg)[1].split(' ').map((p) => p.split(',').map(Number));
  const dx = [pts[1][0] - pts[0][0], pts[2][0] - pts[1][0]];
  const dy = [pts[1][1] - pts[0][1], pts[2][1] - pts[1][1]];
  assert.ok(Math.abs(dx[0] - dx[1]) < 0.2 && Math.abs(dy[0] - dy[1]) < 0.2);
  assert.match(scaleChart(sweep([100, 1000, 10_000], [1, 2, 5])), /^<svg /);
});
