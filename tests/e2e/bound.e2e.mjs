// 20 screenshots of 1–3 MB each go into the live history through the bridge; history.boundImages
// brings the live images under the 8 MiB budget (storage-model §6.5). Proven from the SQLite file.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { withKeepsake, hostCall } from './harness.mjs';
import { makeNoisePng, dataUrl } from './fixtures.mjs';
import { bubbles, waitForBubbles } from './panel.mjs';

const MiB = 1024 * 1024;
const BUDGET = 8 * MiB; // UNSEEN_IMAGE_BYTES_BUDGET, in URL chars

/** URL chars of the canonical data URL of a stored image. */
const urlChars = (mime, bytes) => `data:${mime};base64,`.length + Math.ceil(bytes / 3) * 4;

/** The live history's images, one row per (entry, image). */
function liveImages(k) {
  return k.sql(`SELECT h.position, h.image_count, i.sha256, i.mime, i.byte_length, i.is_thumbnail, i.width, i.height
                FROM history_entries h
                JOIN image_refs r ON r.holder = 'session' AND r.holder_id = h.id
                JOIN images i ON i.sha256 = r.sha256
                ORDER BY h.position`);
}

test('20 screenshots of 1–3 MB are bounded under 8 MiB, every entry keeps a picture', { timeout: 240_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    // appended from a plain extension page (an open panel would render every picture meanwhile)
    const page = await k.openBridgePage();
    const shas = [];
    let rawTotal = 0;
    for (let i = 0; i < 20; i++) {
      const png = makeNoisePng((1 + (i % 3)) * MiB + i * 4096, { seed: i + 1 });
      rawTotal += png.length;
      shas.push(crypto.createHash('sha256').update(png).digest('hex'));
      const r = await hostCall(
        page,
        'history.append',
        {
          entry: {
            role: 'user',
            content: [
              { type: 'text', text: `Screenshot ${i + 1} of the dashboard` },
              { type: 'image_url', image_url: { url: dataUrl(png) } },
            ],
          },
        },
        {},
        { timeoutMs: 60_000 },
      );
      assert.equal(r.index, i);
    }
    assert.ok(rawTotal > 35 * MiB, `generated ${rawTotal} bytes of PNG`);

    // stored: 20 entries, each with its own blob, byte for byte what was appended
    const rows = liveImages(k);
    assert.equal(rows.length, 20);
    assert.deepEqual(rows.map((r) => r.sha256), shas, 'each entry points at the blob of its own PNG');
    const before = rows.reduce((s, r) => s + urlChars(r.mime, r.byte_length), 0);
    assert.ok(before > BUDGET * 4, `before bounding the live images are ${before} URL chars`);
    // no bounding happened on append
    assert.equal(k.sql('SELECT count(*) AS n FROM images WHERE is_thumbnail = 1')[0].n, 0);

    const { rewritten } = await hostCall(page, 'history.boundImages', {}, {}, { timeoutMs: 120_000 });
    assert.ok(rewritten >= 1, `rewritten ${rewritten}`);

    // what each live entry now shows and sends (`image_url`) and keeps (`originalUrl`)
    const entries = k.sql('SELECT position, image_count, entry FROM history_entries ORDER BY position');
    assert.equal(entries.length, 20, 'no entry was dropped');
    for (const e of entries) assert.ok(e.image_count >= 1, `entry ${e.position} still has a picture`);
    const image = (sha) => k.sql(`SELECT sha256, mime, byte_length, is_thumbnail, width, height FROM images WHERE sha256 = '${sha}'`)[0];
    const parts = entries.map((e) => JSON.parse(e.entry).content.find((p) => p.type === 'image_url'));
    const shown = parts.map((p) => image(p.image_url.url.split(':').pop()));
    assert.ok(shown.every(Boolean), 'every entry references a stored image');

    const bytes = shown.reduce((s, r) => s + r.byte_length, 0);
    const chars = shown.reduce((s, r) => s + urlChars(r.mime, r.byte_length), 0);
    assert.ok(bytes < BUDGET, `live image bytes ${bytes} < 8 MiB`);
    assert.ok(chars <= BUDGET, `live image URL chars ${chars} ≤ 8 MiB`);

    // the newest is never touched; the rewritten ones are 480-px JPEG thumbnails that keep their
    // original (the lightbox and the export show it; only requests use the thumbnail)
    assert.equal(shown[19].sha256, shas[19], 'the newest screenshot keeps its original pixels');
    const thumbs = shown.filter((r) => r.is_thumbnail === 1);
    assert.equal(thumbs.length, rewritten);
    for (const th of thumbs) {
      assert.equal(th.mime, 'image/jpeg');
      assert.ok(Math.max(th.width, th.height) <= 480, `thumbnail ${th.width}×${th.height}`);
    }
    parts.forEach((p, i) => {
      const original = p.originalUrl ?? p.image_url.url;
      assert.equal(original.split(':').pop(), shas[i], `entry ${i} keeps its original`);
      assert.ok(image(shas[i]), `original ${i} still stored`);
    });
    const orphans = k.sql(`SELECT count(*) AS n FROM images i
                           WHERE NOT EXISTS (SELECT 1 FROM image_refs r WHERE r.sha256 = i.sha256)`);
    assert.equal(orphans[0].n, 0, 'no orphan blobs left');

    // a second run changes nothing
    const again = await hostCall(page, 'history.boundImages', {}, {}, { timeoutMs: 60_000 });
    assert.equal(again.rewritten, 0);

    // the panel shows the bounded history: 20 user bubbles, each with its picture
    const panel = await k.openPanel();
    const b = await waitForBubbles(panel, (bs) => bs.filter((x) => x.role === 'user' && x.images >= 1).length === 20, {
      timeoutMs: 30_000,
      what: '20 user bubbles with a picture each',
    });
    assert.ok(b.every((x) => x.role === 'user'));
    assert.deepEqual(
      (await bubbles(panel)).map((x) => x.index),
      [...Array(20).keys()],
    );
  });
});
