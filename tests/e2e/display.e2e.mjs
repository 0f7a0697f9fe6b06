// Pictures at display size (storage-model §2.6). A bubble shows a stored picture's display
// rendition, asked for with the batched `images.display` op: the host makes it once (a JPEG at most
// 1280 px wide) and keeps it in `image_renditions`; the lightbox still reads the full-size picture
// with `images.get`; the stored bytes stay what the user attached.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { withKeepsake, hostCall, waitFor } from './harness.mjs';
import { makePng } from './fixtures.mjs';
import { tid } from './panel.mjs';

async function panelReady(panel) {
  await panel.waitForFunction(() => document.documentElement.dataset.ready === 'true', null, { timeout: 20_000 });
}

const shown = (panel, sel) =>
  panel.$$eval(sel, (imgs) => imgs.map((i) => ({ done: i.complete, w: i.naturalWidth, h: i.naturalHeight, src: i.src })));

test('bubbles show display renditions through images.display; the lightbox shows the full-size picture', { timeout: 120_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const panel = await k.openPanel();
    await panelReady(panel);
    const wide = makePng(2400, 1500, { seed: 5, noise: 0.2 });
    const small = makePng(320, 200, { seed: 6 });
    const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
    const part = (b) => ({ type: 'image_url', image_url: { url: `data:image/png;base64,${b.toString('base64')}` } });
    await hostCall(panel, 'history.append', { entry: { role: 'user', content: [{ type: 'text', text: 'a wide screenshot' }, part(wide)] } });
    await hostCall(panel, 'history.append', { entry: { role: 'assistant', content: 'I see it.' } });
    await hostCall(panel, 'history.append', { entry: { role: 'user', content: [{ type: 'text', text: 'and a small one' }, part(small)] } });
    await panel.reload();
    await panelReady(panel);

    const imgs = await waitFor(async () => {
      const xs = await shown(panel, '[data-testid="bubble-image"]');
      return xs.length === 2 && xs.every((x) => x.done && x.w > 0) ? xs : null;
    }, { timeoutMs: 30_000, what: 'both pictures shown' });
    t.diagnostic(`bubbles: ${JSON.stringify(imgs.map(({ w, h }) => ({ w, h })))}`);
    assert.deepEqual(imgs.map(({ w, h }) => [w, h]), [[1280, 800], [320, 200]], 'the wide one at display size, the small one as stored');
    assert.ok(imgs.every((x) => x.src.startsWith('blob:')));

    // made by the host and kept, keyed by the stored picture; the stored bytes are unchanged
    const rows = k.sql('SELECT sha256, mime, width, height FROM image_renditions ORDER BY width DESC');
    assert.deepEqual(rows, [
      { sha256: sha(wide), mime: 'image/jpeg', width: 1280, height: 800 },
      { sha256: sha(small), mime: 'image/png', width: 320, height: 200 },
    ]);
    const stored = k.sql(`SELECT mime, width, byte_length FROM images WHERE sha256 = '${sha(wide)}'`);
    assert.deepEqual(stored, [{ mime: 'image/png', width: 2400, byte_length: wide.length }]);

    // the lightbox: the full-size picture (images.get), not the rendition
    await panel.locator(tid('bubble-image')).first().click();
    await panel.locator(tid('lightbox')).waitFor({ timeout: 10_000 });
    const [full] = await waitFor(async () => {
      const xs = await shown(panel, '[data-testid="lightbox"] img');
      return xs.length === 1 && xs[0].done && xs[0].w > 0 ? xs : null;
    }, { timeoutMs: 15_000, what: 'the lightbox picture' });
    assert.deepEqual([full.w, full.h], [2400, 1500], 'the lightbox shows the original pixels');
    await panel.click(tid('lightbox-close'));

    // a second panel reads the kept renditions (no new rows)
    await panel.reload();
    await panelReady(panel);
    await waitFor(async () => {
      const xs = await shown(panel, '[data-testid="bubble-image"]');
      return xs.length === 2 && xs.every((x) => x.done && x.w > 0);
    }, { timeoutMs: 30_000, what: 'both pictures shown again' });
    assert.equal(k.sql('SELECT count(*) AS n FROM image_renditions')[0].n, 2);
  });
});
