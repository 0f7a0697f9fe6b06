// Image bytes never pass through the service worker (issue 6, scenario 5). The 📷 button captures
// the tab in the side panel and attaches it over the panel's own native port: a second
// keepsake-host process commits it (its pid is in the `changes` row), the worker posts no frame and
// receives no message anywhere near the picture's size, the chip appears from the panel port's own
// `changed` event, and the next turn sends the screenshot to the model. Without a host the picture
// is kept in the composer instead, and the banner says why.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { withKeepsake, waitFor, hostCall } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { startPageServer, ARTICLE_TITLE } from './fixtures.mjs';
import { tid, chips, trayCount, waitForBubbles } from './panel.mjs';
import { live, liveImages } from './db.mjs';

const PREFIX = '[Page context attached by Keepsake]';
/** Larger than any message the worker may see while the panel attaches (the PNG is ≥ 20 KB). */
const SMALL = 16 * 1024;

async function panelReady(panel) {
  await panel.waitForFunction(() => document.documentElement.dataset.ready === 'true', null, { timeout: 20_000 });
}

/** Click 📷 without activating the panel's tab (so the site stays the visible tab to capture). */
function clickScreenshot(panel) {
  return panel.evaluate(() => document.querySelector('[data-testid="screenshot"]').click());
}

/**
 * In the worker: record the size of every frame it posts to its native port (a wrapped
 * connectNative; the port is reopened through it) and of every runtime message it receives.
 */
function instrumentWorker() {
  self.__pixelsProbe = { posted: [], received: [] };
  const probe = self.__pixelsProbe;
  const connect = chrome.runtime.connectNative;
  chrome.runtime.connectNative = (name) => {
    const port = connect.call(chrome.runtime, name);
    const post = port.postMessage.bind(port);
    port.postMessage = (msg) => {
      probe.posted.push({ op: msg?.op, chars: JSON.stringify(msg).length });
      post(msg);
    };
    return port;
  };
  chrome.runtime.onMessage.addListener((msg) => {
    probe.received.push({ kind: msg?.kind, op: msg?.op, chars: JSON.stringify(msg ?? null).length });
  });
  self.__keepsake.port.close();
}

test('📷 attaches through the panel’s own host process: stored in SQLite, never through the worker', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm({ script: { text: 'A lighthouse article.', chunkSize: 8 } });
  const site = await startPageServer();
  try {
    await withKeepsake(t, {}, async (k) => {
      const tab = await k.context.newPage();
      await tab.goto(site.url);
      const panel = await k.openPanel();
      await panelReady(panel);
      await hostCall(panel, 'settings.set', {
        map: { providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }], activeProvider: 'p1' },
      });
      await k.worker.evaluate(instrumentWorker);
      await hostCall(panel, 'history.meta'); // the worker's port again, through the probe
      const [workerHost] = k.hostPids();
      assert.equal(k.hostPids().length, 1, 'one host process so far: the worker’s');

      // ---- the site is the visible tab; 📷 in the panel
      await tab.bringToFront();
      await clickScreenshot(panel);
      const chip = await waitFor(async () => (await chips(panel)).find((c) => /Screenshot/.test(c.text)), {
        timeoutMs: 20_000,
        what: 'the screenshot chip',
      });
      await waitFor(async () => /^Screenshot of “.+” attached\.$/.test(await panel.innerText(tid('composer-note'))), {
        timeoutMs: 5000,
        what: 'the composer note',
      });
      assert.equal(await trayCount(panel), 0, 'nothing went into the composer');

      // ---- stored: a screenshot attach entry with one PNG blob, committed by the panel's process
      const rows = live(k);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].attach_id, chip.attachId);
      assert.equal(rows[0].image_count, 1);
      assert.equal(rows[0].text, `${PREFIX}\nURL: ${site.url}\nTitle: ${ARTICLE_TITLE}\nMode: screenshot\n---\n\n(screenshot)`);
      const att = k.sql(`SELECT json_extract(ctx, '$.mode') AS mode, json_extract(ctx, '$.url') AS url FROM attachments WHERE attach_id = '${chip.attachId}'`);
      assert.deepEqual(att, [{ mode: 'screenshot', url: site.url }]);
      const [img] = liveImages(k);
      const meta = k.sql(`SELECT mime, width, height, byte_length FROM images WHERE sha256 = '${img.sha256}'`)[0];
      const vp = tab.viewportSize();
      assert.deepEqual({ mime: meta.mime, width: meta.width, height: meta.height }, { mime: 'image/png', width: vp.width, height: vp.height });
      assert.ok(meta.byte_length > SMALL, `the PNG is ${meta.byte_length} bytes`);

      const commits = k.sql(`SELECT c.origin FROM changes c JOIN client_requests r ON r.client_request_id = c.client_request_id
                             WHERE r.op = 'history.attach'`);
      assert.equal(commits.length, 1);
      const pid = Number(/^pid (\d+) /.exec(commits[0].origin)?.[1]);
      assert.notEqual(pid, workerHost, 'not committed by the worker’s host process');
      assert.ok(k.hostPids().includes(pid), `committed by the panel’s own keepsake-host (pid ${pid})`);

      // ---- the worker carried no picture: every frame it posted and every message it got is small
      const probe = await k.worker.evaluate(() => self.__pixelsProbe);
      const biggest = (xs) => xs.reduce((m, x) => (x.chars > m.chars ? x : m), { chars: 0 });
      t.diagnostic(`worker: ${probe.posted.length} frames posted (largest ${JSON.stringify(biggest(probe.posted))}), ${probe.received.length} messages received (largest ${JSON.stringify(biggest(probe.received))})`);
      assert.ok(probe.posted.length > 0, 'the probe saw the worker’s frames');
      assert.ok(biggest(probe.posted).chars < SMALL, 'no frame from the worker carried the picture');
      assert.ok(biggest(probe.received).chars < SMALL, 'no message to the worker carried the picture');
      assert.ok(!probe.posted.some((p) => p.op === 'history.attach'), 'the worker sent no history.attach');

      // ---- the next turn sends the screenshot to the model (the attach entry, then the question)
      await panel.fill(tid('composer-input'), 'What does this screenshot show?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.text === 'A lighthouse article.'), {
        timeoutMs: 30_000,
        what: 'the reply',
      });
      const body = mock.requests.filter((r) => r.kind === 'chat').at(-1).body;
      const sent = body.messages.find((m) => Array.isArray(m.content) && m.content.some((p) => p.type === 'image_url'));
      assert.ok(sent, 'a message carries the screenshot');
      const url = sent.content.find((p) => p.type === 'image_url').image_url.url;
      const bytes = Buffer.from(url.slice(url.indexOf(',') + 1), 'base64');
      assert.equal(crypto.createHash('sha256').update(bytes).digest('hex'), img.sha256, 'the stored picture, byte for byte');

      // ---- × removes it
      await panel.click(`${tid('attach-chip')}[data-attach-id="${chip.attachId}"] ${tid('attach-undo')}`);
      await waitFor(() => !live(k).some((r) => r.attach_id === chip.attachId), { timeoutMs: 5000, what: 'the screenshot entry removed' });
    });
  } finally {
    await site.close();
    await mock.close();
  }
});

test('📷 without a host: the screenshot waits in the composer, the banner says why', { timeout: 60_000 }, async (t) => {
  const site = await startPageServer();
  try {
    await withKeepsake(t, { hostInstalled: false }, async (k) => {
      const tab = await k.context.newPage();
      await tab.goto(site.url);
      const panel = await k.openPanel();
      await panel.waitForSelector(`${tid('host-banner')}:not([hidden])`, { timeout: 15_000 });
      await tab.bringToFront();
      await clickScreenshot(panel);
      await waitFor(async () => (await trayCount(panel)) === 1, { timeoutMs: 15_000, what: 'the screenshot in the composer' });
      assert.equal(
        await panel.innerText(tid('composer-note')),
        'Could not attach the screenshot: The Keepsake host is not installed for this browser. It is in the composer instead and goes with your next message.',
      );
      assert.equal(await panel.getAttribute(tid('host-banner'), 'data-code'), 'host_not_found');
      assert.equal((await chips(panel)).length, 0);
      // kept with the draft (chrome.storage.session), like a pasted picture
      await waitFor(
        () => panel.evaluate(async () => (await chrome.storage.session.get('composerDraft')).composerDraft?.images?.length === 1),
        { timeoutMs: 5000, what: 'the screenshot kept in the draft' },
      );
    });
  } finally {
    await site.close();
  }
});

test('the composer takes its per-message image cap from the host (host.hello limits)', { timeout: 60_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const panel = await k.openPanel();
    await panelReady(panel);
    const hello = await hostCall(panel, 'host.hello', {});
    const max = hello.limits.turnMaxImages;
    assert.ok(Number.isInteger(max) && max > 0, `hello.limits.turnMaxImages: ${max}`);
    // the worker's host has answered hello now, so a panel that starts reads the caps before it is ready
    await panel.reload();
    await panelReady(panel);
    const files = Array.from({ length: max + 1 }, (_, i) => ({
      name: `p${i}.png`,
      mimeType: 'image/png',
      // a 1×1 PNG with a private chunk, so every file's bytes differ
      buffer: Buffer.concat([
        Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4//8/AAX+Av4N70a4AAAAAElFTkSuQmCC', 'base64'),
        Buffer.from(`#${i}`),
      ]),
    }));
    await panel.setInputFiles(tid('add-image'), files);
    await waitFor(async () => (await trayCount(panel)) === max, { timeoutMs: 15_000, what: `${max} pictures in the tray` });
    const note = await panel.innerText(tid('composer-note'));
    assert.match(note, new RegExp(`at most ${max} images`), note);
  });
});
