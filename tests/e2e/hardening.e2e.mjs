// Issue 18 (hardening from a hostile-input review), in the real browser:
//   1. a crafted reply that made stripChoiceBlocks backtrack for minutes: the panel shows it, the
//      reply is stored whole, and the worker answers the next message within seconds;
//   2. a provider that redirects: the send fails with an error saying so, Options' Ping says the
//      same, and nothing (so not the API key) reaches the other origin (Chromium would have followed
//      a 307 with `x-api-key`);
//   3. Options warns about plain http:// to another machine and asks before saving it; loopback http
//      saves as before;
//   4. the Content Security Policy: the panel (paste, send, pictures, drawer), Options (Ping) and the
//      worker (provider fetches) run with no violation, and the policy is enforced (inline style,
//      <base>, ws: are refused in the pages and the worker).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withKeepsake, waitFor, hostCall, workerCall } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { makePng } from './fixtures.mjs';
import { tid, bubbles, waitForBubbles, sendAndAwaitReply, pasteImages, trayCount, addProvider, openDrawer } from './panel.mjs';
import { live } from './db.mjs';

/** Make a mock the active provider through settings.set. */
async function useProvider(page, card) {
  await hostCall(page, 'settings.set', { map: { providers: [{ id: 'p1', name: 'Mock', model: 'mock-model', apiKey: '', ...card }], activeProvider: 'p1' } });
}

const entryText = (e) => (typeof e.content === 'string' ? e.content : e.content.map((p) => p.text || '').join(''));

// ---------------------------------------------------------------------------------------------
// 1. The crafted reply

test('a crafted 44 KB reply is shown and stored; the worker answers the next message within seconds', { timeout: 180_000 }, async (t) => {
  // "```choices\n" × 2,000, "\n```", 22,400 spaces and "x". The old regexes' work grew as n·k² (n
  // openings, k spaces): 7 s in Node for n = 250, k = 5,600 (8.4 KB), so minutes for this one; with
  // the extension of a0aed3b this test fails at the 20 s wait below. The scanner takes about a ms.
  const N = 2000;
  const CRAFTED = '```choices\n'.repeat(N) + '\n```' + ' '.repeat(22_400) + 'x';
  const mock = await startMockLlm({
    script: (req) => (req.lastUserText.startsWith('Crafted') ? { text: CRAFTED, chunkSize: 700 } : {}),
  });
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      await useProvider(panel, { kind: 'chat', baseUrl: `${mock.url}/v1` });
      await panel.waitForSelector(`${tid('stop')}[hidden]`, { state: 'attached' });
      const t0 = Date.now();
      await panel.fill(tid('composer-input'), 'Crafted reply, please');
      await panel.click(tid('send'));
      const shown = await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming), {
        timeoutMs: 20_000,
        what: 'the crafted reply, finished',
      });
      const firstMs = Date.now() - t0;
      const reply = shown.find((x) => x.role === 'assistant');
      assert.equal((reply.text.match(/```choices/g) || []).length, N - 1, 'the panel shows the reply (a code block of its lines)');
      assert.match(reply.text, /x$/);
      // stored whole: it has no closing fence, so there is no choice block to strip
      const stored = live(k).filter((r) => r.role === 'assistant');
      assert.equal(stored.length, 1);
      assert.equal(entryText(stored[0].entry), CRAFTED);

      // the worker is not busy: it answers at once, and the next message gets its reply within seconds
      const t1 = Date.now();
      await workerCall(panel, 'chat.state', {}, { timeoutMs: 5000 });
      const stateMs = Date.now() - t1;
      const second = await sendAndAwaitReply(panel, 'Are you still there?', 'Mock reply to: Are you still there?', { timeoutMs: 10_000 });
      t.diagnostic(`crafted reply shown ${firstMs} ms after Send; chat.state answered in ${stateMs} ms; the next reply in ${second.ms} ms`);
      assert.ok(second.ms < 10_000);
    });
  } finally {
    await mock.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 2. Redirects

test('a redirecting provider: a clear error, and nothing (no key) reaches the other origin (send and Ping)', { timeout: 180_000 }, async (t) => {
  const other = await startMockLlm(); // another port: another origin
  const mock = await startMockLlm();
  const KEY = 'sk-ant-e2e-secret-18';
  const keyAt = (server) => server.requests.filter((r) => JSON.stringify(r.headers).includes(KEY));
  try {
    await withKeepsake(t, {}, async (k) => {
      const panel = await k.openPanel();
      for (const kind of ['anthropic', 'chat']) {
        const path = kind === 'chat' ? '/v1/chat/completions' : '/v1/messages';
        mock.setScript({ redirect: `${other.url}${path}` });
        mock.requests.length = 0;
        other.requests.length = 0;
        await useProvider(panel, { kind, baseUrl: kind === 'chat' ? `${mock.url}/v1` : mock.url, apiKey: KEY });
        await panel.waitForSelector(`${tid('stop')}[hidden]`, { state: 'attached' });
        await panel.evaluate(() => document.querySelectorAll('[data-testid="chat-error"]').forEach((n) => n.remove()));
        await panel.fill(tid('composer-input'), `Hello through a redirect (${kind})`);
        await panel.click(tid('send'));
        // (a browser that follows the redirect gets a reply from the other server: stop waiting then)
        const notice = await waitFor(
          // shown once, in the message's "Not answered" mark (issue 32: no second card with the same text)
          async () => (other.requests.length ? '(a request reached the other origin)'
            : panel.locator('[data-testid="bubble"]', { hasText: `Hello through a redirect (${kind})` }).locator(tid('failed-mark')).innerText({ timeout: 500 }).catch(() => null)),
          { timeoutMs: 20_000, what: 'the Not answered mark' },
        );
        assert.deepEqual(keyAt(other).map((r) => `${r.method} ${r.path}`), [], `${kind}: the key reached the other origin`);
        assert.match(notice, /^Not answered: /);
        assert.equal(await panel.locator(tid('chat-error')).count(), 0, 'the error is not shown twice');
        assert.ok(notice.includes(mock.url), `the notice names the configured origin: ${notice}`);
        assert.match(notice, /answered with a redirect \(the browser does not show where to\)/, 'Chromium hides the Location');
        assert.match(notice, /does not follow redirects, so your API key was not sent anywhere else/);
        assert.equal(keyAt(mock).length, 1, 'the configured server got the key once');
        assert.deepEqual(other.requests, [], `${kind}: no request at all reached the other origin (before issue 18: the key, with a 307)`);
        t.diagnostic(`${kind}: notice: ${notice.split('\n').join(' ')}`);
      }
      const failed = live(k).filter((r) => r.role === 'user' && r.entry.failed);
      assert.equal(failed.length, 2, 'both messages are kept, marked not answered');
      assert.equal(failed[0].entry.failed.code, 'redirect');

      // Ping in Options: the models list redirects too
      const opt = await k.openOptions();
      mock.setScript({ redirect: `${other.url}/v1/models` });
      other.requests.length = 0;
      const id = await addProvider(opt, { name: 'Redirecting', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: KEY, model: 'mock-model' });
      const card = opt.locator(`${tid('provider-card')}[data-id="${id}"]`);
      await card.locator(tid('provider-ping')).click();
      const result = await waitFor(async () => {
        const s = await card.locator(tid('provider-ping-result')).innerText();
        return /^(OK|Failed)/.test(s) ? s : null;
      }, { timeoutMs: 20_000, what: 'the ping result' });
      assert.match(result, /^Failed/);
      assert.match(result, /answered with a redirect/, result);
      assert.deepEqual(other.requests, [], 'Ping sent nothing there either');
    });
  } finally {
    await mock.close();
    await other.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 3. Plain http to another machine

test('Options warns about plain http to another machine and asks before saving it; loopback http is fine', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm();
  try {
    await withKeepsake(t, {}, async (k) => {
      const opt = await k.openOptions();
      const stored = async () => ((await hostCall(opt, 'settings.get', { keys: ['providers'] })).providers || []).map((p) => p.baseUrl);

      // loopback http: no warning, saved at once (addProvider waits for "Saved.")
      const localId = await addProvider(opt, { name: 'Local', kind: 'chat', baseUrl: `${mock.url}/v1`, model: 'mock-model' });
      const local = opt.locator(`${tid('provider-card')}[data-id="${localId}"]`);
      assert.equal(await local.locator(tid('provider-insecure')).innerText(), '');
      assert.equal(await local.locator(tid('provider-insecure')).isVisible(), false);

      // a LAN address on plain http (TEST-NET-1: never contacted here)
      const LAN = 'http://192.0.2.10:11434/v1';
      await opt.selectOption(tid('provider-preset'), 'custom');
      await opt.click(tid('provider-add'));
      const card = opt.locator(tid('provider-card')).nth(1);
      await card.locator(tid('provider-name')).fill('LAN box');
      await card.locator(tid('provider-base-url')).fill(LAN);
      await card.locator(tid('provider-api-key')).fill('sk-lan');
      await card.locator(tid('provider-model')).fill('llama3.2');
      const warning = card.locator(tid('provider-insecure'));
      await waitFor(async () => /Not encrypted/.test(await warning.innerText()), { timeoutMs: 5000, what: 'the http warning' });
      const text = await warning.innerText();
      assert.ok(text.includes('192.0.2.10:11434'), text);
      assert.match(text, /Your API key and every message/);
      assert.equal(await warning.isVisible(), true);

      // Save asks; Cancel stores nothing
      await card.locator(tid('provider-save')).click();
      const confirm = card.locator(tid('insecure-confirm'));
      await confirm.waitFor({ timeout: 5000 });
      assert.match(await card.locator(tid('insecure-question')).innerText(), /Save this base URL anyway\?/);
      await card.locator(tid('insecure-cancel')).click();
      await waitFor(async () => /Not saved/.test(await card.locator(tid('provider-status')).innerText()), { timeoutMs: 5000, what: 'Not saved' });
      assert.deepEqual(await stored(), [`${mock.url}/v1`], 'nothing stored after Cancel');

      // Save anyway stores it
      await card.locator(tid('provider-save')).click();
      await confirm.waitFor({ timeout: 5000 });
      await card.locator(tid('insecure-save')).click();
      await waitFor(async () => /Saved/.test(await card.locator(tid('provider-status')).innerText()), { timeoutMs: 10_000, what: 'Saved' });
      assert.deepEqual(await stored(), [`${mock.url}/v1`, LAN]);

      // the warning stays on the saved card; editing another field does not ask again
      await card.locator(tid('provider-model')).fill('llama3.3');
      await card.locator(tid('provider-save')).click();
      await waitFor(async () => /Saved/.test(await card.locator(tid('provider-status')).innerText()), { timeoutMs: 10_000, what: 'Saved again' });
      assert.equal(await card.locator(tid('insecure-confirm')).count(), 0);
      assert.match(await warning.innerText(), /Not encrypted/);

      // https or loopback in the field clears the warning as it is typed
      await card.locator(tid('provider-base-url')).fill('https://192.0.2.10/v1');
      await waitFor(async () => (await warning.innerText()) === '', { timeoutMs: 5000, what: 'the warning cleared' });
      await card.locator(tid('provider-base-url')).fill('http://127.0.0.2:11434/v1');
      assert.equal(await warning.innerText(), '');
    });
  } finally {
    await mock.close();
  }
});

// ---------------------------------------------------------------------------------------------
// 4. Content Security Policy

/** In every page of the context, from document start: CSP violations into window.__csp. */
function recordViolations() {
  window.__csp = [];
  document.addEventListener('securitypolicyviolation', (e) => {
    window.__csp.push({ directive: e.effectiveDirective || e.violatedDirective, blocked: e.blockedURI, page: location.pathname });
  });
}

test('CSP: panel, Options and worker run with no violation, and the policy is enforced', { timeout: 180_000 }, async (t) => {
  const mock = await startMockLlm({ script: { text: 'A reply with **Markdown**, a [link](https://example.com) and `code`.' } });
  try {
    await withKeepsake(t, {}, async (k) => {
      await k.context.addInitScript(recordViolations);
      const consoleCsp = [];
      k.context.on('console', (m) => {
        if (/Content Security Policy/i.test(m.text())) consoleCsp.push(`${m.type()}: ${m.text()}`);
      });
      await k.worker.evaluate(() => {
        self.__csp = [];
        self.addEventListener('securitypolicyviolation', (e) => self.__csp.push({ directive: e.effectiveDirective || e.violatedDirective, blocked: e.blockedURI }));
      });

      // the panel: a pasted picture (data:), a send (the worker's fetch), the stored picture (blob:), the drawer
      const panel = await k.openPanel();
      await useProvider(panel, { kind: 'chat', baseUrl: `${mock.url}/v1` });
      await pasteImages(panel, [makePng(64, 48, { seed: 18 })]);
      await waitFor(async () => (await trayCount(panel)) === 1, { timeoutMs: 5000, what: 'the picture in the tray' });
      await panel.fill(tid('composer-input'), 'Describe the picture');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming), { timeoutMs: 30_000, what: 'the reply' });
      await panel.reload();
      await waitFor(async () => (await bubbles(panel)).some((b) => b.role === 'user' && b.images === 1), { timeoutMs: 10_000, what: 'the stored picture' });
      await waitFor(
        () => panel.$$eval('img[data-testid="bubble-image"]', (els) => els.some((i) => i.complete && i.naturalWidth > 0 && i.src.startsWith('blob:'))),
        { timeoutMs: 10_000, what: 'the picture drawn from a blob: URL' },
      );
      await openDrawer(panel);

      // Options: the page, and a Ping (its own fetch)
      const opt = await k.openOptions();
      const id = await addProvider(opt, { name: 'Mock in Options', kind: 'chat', baseUrl: `${mock.url}/v1`, model: 'mock-model' });
      const card = opt.locator(`${tid('provider-card')}[data-id="${id}"]`);
      await card.locator(tid('provider-ping')).click();
      await waitFor(async () => /^OK/.test(await card.locator(tid('provider-ping-result')).innerText()), { timeoutMs: 15_000, what: 'Ping OK' });

      const pagesCsp = [];
      for (const p of [panel, opt]) pagesCsp.push(...(await p.evaluate(() => window.__csp || [])));
      const workerCsp = await k.worker.evaluate(() => self.__csp);
      assert.deepEqual({ pages: pagesCsp, worker: workerCsp, console: consoleCsp }, { pages: [], worker: [], console: [] }, 'no CSP violation');

      // enforced: an inline style, a <base> and a WebSocket are refused in both pages, ws: in the worker
      for (const p of [panel, opt]) {
        const seen = await p.evaluate(async () => {
          window.__csp = [];
          const style = document.createElement('style');
          style.textContent = 'body { outline: 1px solid red }';
          document.head.append(style);
          const base = document.createElement('base');
          base.href = 'https://example.com/';
          document.head.append(base);
          try {
            new WebSocket('ws://127.0.0.1:9/');
          } catch {
            // refused synchronously in some versions: the event still fires
          }
          await new Promise((r) => setTimeout(r, 500));
          return [...new Set(window.__csp.map((v) => v.directive))].sort();
        });
        assert.deepEqual(seen, ['base-uri', 'connect-src', 'style-src-elem'], `enforced in ${await p.evaluate(() => location.pathname)}`);
      }
      const inWorker = await k.worker.evaluate(async () => {
        self.__csp = [];
        try {
          new WebSocket('ws://127.0.0.1:9/');
        } catch {
          // see above
        }
        let data = 'fetched';
        await fetch('data:text/plain,x').catch(() => (data = 'refused'));
        await new Promise((r) => setTimeout(r, 500));
        return { directives: [...new Set(self.__csp.map((v) => v.directive))], data };
      });
      assert.deepEqual(inWorker, { directives: ['connect-src'], data: 'refused' }, 'the worker is under connect-src too');
    });
  } finally {
    await mock.close();
  }
});
