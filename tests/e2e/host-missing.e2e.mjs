// No host manifest: the panel says so (with the browser's own words and the fix command), the
// composer keeps the draft text and image, nothing hangs. Installing the host with the shown
// command and pressing Retry recovers, and the kept draft is then sent and stored.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { withKeepsake, waitFor, installHost, hostCall, annotate } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { makePng } from './fixtures.mjs';
import { tid, bubbles, pasteImages, trayCount, waitForBubbles } from './panel.mjs';
import { live } from './db.mjs';

const NOT_FOUND = 'Specified native messaging host not found.';

test('host not installed: banner with the browser text and the fix; the draft is kept; Retry recovers', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm({ script: { text: 'Now it works.', chunkSize: 4 } });
  try {
    await withKeepsake(t, { hostInstalled: false }, async (k) => {
      assert.equal(fs.existsSync(k.dbPath), false);
      const panel = await k.openPanel();

      // the banner appears by itself (the panel reads the history on load)
      const t0 = Date.now();
      await panel.waitForSelector(`${tid('host-banner')}:not([hidden])`, { timeout: 10_000 });
      t.diagnostic(`banner after ${Date.now() - t0} ms`);
      assert.equal(await panel.getAttribute(tid('host-banner'), 'data-code'), 'host_not_found');
      assert.match(await panel.innerText(tid('host-banner-title')), /not installed/i);
      assert.ok((await panel.innerText(tid('host-banner-detail'))).includes(NOT_FOUND), 'the browser text is shown');
      // the fix is a command, copied as it is; where to run it (and the --user-data-dir form) beside it
      assert.equal(await panel.innerText(tid('host-fix')), './install.sh');
      assert.match(await panel.innerText(tid('host-fix-then')), /keepsake-host install --user-data-dir DIR/);

      // a draft with an image: Send fails fast and keeps both
      const draft = 'Please keep this draft while the host is missing';
      await pasteImages(panel, [makePng(80, 60, { seed: 3 })]);
      await waitFor(async () => (await trayCount(panel)) === 1, { timeoutMs: 5000, what: 'image in the tray' });
      await panel.fill(tid('composer-input'), draft);
      // watch the Send button's busy flag: it must go on and come back off (the call returned)
      await panel.evaluate(() => {
        const b = document.querySelector('[data-testid="send"]');
        window.__busy = [];
        new MutationObserver(() => window.__busy.push(b.getAttribute('aria-busy'))).observe(b, {
          attributes: true,
          attributeFilter: ['aria-busy'],
        });
      });
      const t1 = Date.now();
      await panel.click(tid('send'));
      await waitFor(
        async () => {
          const seen = await panel.evaluate(() => window.__busy);
          return seen.includes('true') && seen[seen.length - 1] === 'false';
        },
        { timeoutMs: 10_000, what: 'the send to finish (aria-busy true → false)' },
      );
      t.diagnostic(`send failed after ${Date.now() - t1} ms`);
      // connection errors are shown in the banner (not as a chat notice)
      assert.equal(await panel.getAttribute(tid('host-banner'), 'data-code'), 'host_not_found');
      assert.equal(await panel.isHidden(tid('host-banner')), false);
      assert.equal(await panel.inputValue(tid('composer-input')), draft);
      assert.equal(await trayCount(panel), 1);
      assert.equal((await bubbles(panel)).length, 0, 'no bubble for an unsent message');
      assert.equal(await panel.isHidden(tid('stop')), true, 'no stuck stream');
      assert.equal(await panel.isEnabled(tid('send')), true);
      assert.equal(fs.existsSync(k.dbPath), false, 'no database was created');

      // the draft survives a panel reload (it is kept in chrome.storage.session, debounced 300 ms)
      await waitFor(
        () =>
          panel.evaluate(
            async (text) => (await chrome.storage.session.get('composerDraft')).composerDraft?.text === text,
            draft,
          ),
        { timeoutMs: 5000, what: 'the draft kept in chrome.storage.session' },
      );
      await panel.reload();
      await waitFor(async () => (await panel.inputValue(tid('composer-input'))) === draft, {
        timeoutMs: 10_000,
        what: 'the draft text after reload',
      });
      await waitFor(async () => (await trayCount(panel)) === 1, { timeoutMs: 10_000, what: 'the draft image after reload' });
      await panel.waitForSelector(`${tid('host-banner')}:not([hidden])`, { timeout: 10_000 });

      // run the fix (the installer), press Retry: the banner goes away
      const env = { ...process.env, KEEPSAKE_DB: k.dbPath };
      installHost(k.profileDir, env);
      await panel.click(tid('host-retry'));
      await panel.waitForSelector(`${tid('host-banner')}[hidden]`, { state: 'attached', timeout: 15_000 }).catch(async (e) => {
        const st = await panel.evaluate(() => chrome.runtime.sendMessage({ kind: 'host.state' }));
        throw annotate(e, `Retry did not clear the banner; the worker's host.state: ${JSON.stringify(st?.result ?? st).slice(0, 240)}`);
      });
      assert.ok(fs.existsSync(k.dbPath), 'the host created its database');

      // the kept draft is sent and stored
      await hostCall(panel, 'settings.set', {
        map: { providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'm' }], activeProvider: 'p1' },
      });
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming && x.text === 'Now it works.'), {
        timeoutMs: 20_000,
        what: 'the reply to the kept draft',
      });
      const rows = live(k);
      assert.deepEqual(rows.map((r) => [r.role, r.image_count]), [
        ['user', 1],
        ['assistant', 0],
      ]);
      assert.equal(rows[0].text, draft);
      assert.equal(await panel.inputValue(tid('composer-input')), '');
    });
  } finally {
    await mock.close();
  }
});

test('host.reconnect (the Retry button) connects even while a request waits in the reconnect backoff', { timeout: 60_000 }, async (t) => {
  await withKeepsake(t, { hostInstalled: false }, async (k) => {
    const page = await k.openBridgePage();
    // three failures: the next request waits (backoff 4 s) before it tries again
    for (let i = 0; i < 3; i++) {
      const err = await hostCall(page, 'history.meta').then(
        () => null,
        (e) => e.reply?.error?.code,
      );
      assert.equal(err, 'host_not_found');
    }
    const waiting = hostCall(page, 'history.meta').catch((e) => e);
    await new Promise((r) => setTimeout(r, 300));
    installHost(k.profileDir, { ...process.env, KEEPSAKE_DB: k.dbPath });
    const st = await page.evaluate(() => chrome.runtime.sendMessage({ kind: 'host.reconnect' }));
    await waiting;
    assert.equal(st.ok, true);
    assert.equal(
      st.result.state,
      'open',
      `host.reconnect must connect now; it returned state "${st.result.state}" with error ${JSON.stringify(st.result.error?.code)}`,
    );
    assert.equal(st.result.hello?.dbPath, k.dbPath);
  });
});

test('host not installed: Options explains it once, in its banner, not in every field', { timeout: 60_000 }, async (t) => {
  await withKeepsake(t, { hostInstalled: false }, async (k) => {
    const opt = await k.openOptions();
    await opt.waitForSelector(`${tid('host-banner')}:not([hidden])`, { timeout: 10_000 });
    assert.ok((await opt.innerText(tid('host-banner-detail'))).includes(NOT_FOUND));
    // every field that could not be read has had its say
    await waitFor(async () => (/not connected/.test(await opt.innerText('body')) ? true : null), { timeoutMs: 10_000, what: 'the fields' });
    await opt.waitForTimeout(500);
    const body = await opt.innerText('body');
    const count = (s) => body.split(s).length - 1;
    t.diagnostic(`"${NOT_FOUND}" ${count(NOT_FOUND)}×, "not installed for this browser" ${count('not installed for this browser')}×`);
    assert.equal(count(NOT_FOUND), 1, "the browser's words appear once (the banner)");
    assert.equal(count('The browser found no usable dev.keepsake.host manifest'), 1, 'the long explanation appears once');
  });
});
