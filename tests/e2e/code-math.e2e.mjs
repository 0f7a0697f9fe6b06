// Code blocks and math in replies, through the real panel, worker and host: the mock LLM streams a
// reply with a python code block, inline math, a dollar amount and display math; the panel loads
// highlight.js and KaTeX on demand (lib/rich.js) and shows hljs token spans, the "python" label, a
// Copy button that copies exactly the code and says Copied, KaTeX (MathML inside .katex) inline and
// .katex-display for display math, with KaTeX's stylesheet and fonts from the extension itself.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withKeepsake, waitFor, hostCall, EXT_ID } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, waitForBubbles } from './panel.mjs';

const CODE = 'def area(r):\n    """Circle area."""\n    return 3.14159 * r ** 2  # <b>&</b>';
const REPLY = [
  'Here is the function:',
  '',
  '```python',
  CODE,
  '```',
  '',
  'It computes $A = \\pi r^2$, which costs $5 and $10 to print.',
  '',
  '$$',
  '\\int_0^R 2\\pi r\\,dr = \\pi R^2',
  '$$',
].join('\n');

test('a reply with a python block and formulas: hljs spans, label, Copy copies the code, KaTeX inline and display', { timeout: 120_000 }, async (t) => {
  const mock = await startMockLlm({ script: { text: REPLY, chunkSize: 9, delayMs: 5 } });
  try {
    await withKeepsake(t, {}, async (k) => {
      // the clipboard is read from an ordinary page (permissions cannot be granted to the extension's origin)
      await k.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: mock.url });
      const reader = await k.context.newPage();
      await reader.goto(`${mock.url}/v1/models`);
      const clipboard = async (write) => {
        await reader.bringToFront();
        return reader.evaluate((w) => (w === undefined ? navigator.clipboard.readText() : navigator.clipboard.writeText(w)), write);
      };
      await clipboard('before');
      const panel = await k.openPanel();
      await hostCall(panel, 'settings.set', {
        map: {
          providers: [{ id: 'p1', name: 'Mock', kind: 'chat', baseUrl: `${mock.url}/v1`, apiKey: '', model: 'mock-model' }],
          activeProvider: 'p1',
        },
      });
      // first paint loads neither library
      const before = await panel.evaluate(() => performance.getEntriesByType('resource').map((r) => r.name).filter((n) => /vendor\/(katex|highlight)/.test(n)));
      assert.deepEqual(before, []);

      await panel.fill(tid('composer-input'), 'Area of a circle in python?');
      await panel.click(tid('send'));
      await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && !x.streaming), { what: 'the stored reply' });
      const reply = panel.locator('[data-testid="bubble"][data-role="assistant"]:not([data-streaming]) .msg-body');

      // highlighting: hljs token spans in the code, the text unchanged
      await waitFor(async () => (await reply.locator('code.hljs .hljs-keyword').count()) > 0, { what: 'hljs token spans', timeoutMs: 15_000 });
      const code = reply.locator('.md-codeblock pre code');
      assert.equal(await code.getAttribute('class'), 'language-python hljs');
      assert.equal(await code.evaluate((el) => el.textContent), CODE);
      assert.equal(await reply.locator('code .hljs-keyword').first().textContent(), 'def');
      assert.ok((await reply.locator('code .hljs-string').count()) >= 1);
      assert.equal(await reply.locator('code .hljs-comment').textContent(), '# <b>&</b>');
      assert.equal(await reply.locator('code b').count(), 0, 'markup in code stays text');
      assert.equal(await reply.locator('.md-code-lang').textContent(), 'python');
      // the token colour comes from sidepanel.css
      const colours = await reply.locator('code .hljs-keyword').first().evaluate((el) => [getComputedStyle(el).color, getComputedStyle(el.parentElement).color]);
      assert.notEqual(colours[0], colours[1], 'keywords are coloured');

      // Copy: exactly the code on the clipboard, and the button says so
      const copy = reply.locator('.md-codeblock .md-copy');
      assert.equal(await copy.textContent(), 'Copy');
      await panel.bringToFront();
      await copy.click();
      await waitFor(async () => (await copy.textContent()) === 'Copied', { what: 'Copied on the button', timeoutMs: 5_000 });
      assert.equal(await clipboard(), CODE);
      await panel.bringToFront();
      await waitFor(async () => (await copy.textContent()) === 'Copy', { what: 'the label back to Copy', timeoutMs: 5_000 });

      // math: KaTeX with MathML inline, .katex-display for display math, the dollars left as text
      await waitFor(async () => (await reply.locator('.katex').count()) === 2, { what: 'two KaTeX formulas', timeoutMs: 15_000 });
      const inline = reply.locator('p .md-math .katex');
      assert.equal(await inline.count(), 1);
      assert.equal(await inline.locator('math').count(), 1, 'MathML inside .katex');
      assert.equal(await inline.locator('annotation').textContent(), 'A = \\pi r^2');
      assert.match(await reply.locator('p').nth(1).innerText(), /costs \$5 and \$10 to print\./);
      const display = reply.locator('.md-math-block .katex-display');
      assert.equal(await display.count(), 1);
      assert.equal(await display.locator('math[display="block"]').count(), 1);
      assert.equal(await reply.locator('.md-math-src').count(), 0, 'no formula fell back to its source');
      // KaTeX's stylesheet (a <link> to the extension's file) is applied and its fonts load from the extension
      assert.equal(await panel.locator(`link[data-katex-css][href^="chrome-extension://${EXT_ID}/vendor/katex/"]`).count(), 1);
      assert.equal(await inline.locator('.katex-mathml').evaluate((el) => getComputedStyle(el).position), 'absolute', 'katex.min.css applies');
      const loaded = await waitFor(async () => {
        const faces = await panel.evaluate(() => [...document.fonts].filter((f) => f.family.replace(/"/g, '').startsWith('KaTeX_')).map((f) => [f.family, f.status]));
        const done = faces.filter(([, status]) => status === 'loaded');
        return done.length > 0 && !faces.some(([, status]) => status === 'loading' || status === 'error') ? done : null;
      }, { what: 'KaTeX fonts loaded', timeoutMs: 10_000 });
      assert.ok(loaded.some(([family]) => /KaTeX_Main|KaTeX_Math/.test(family)), JSON.stringify(loaded));

      // safety over the whole reply: no handler attributes, no javascript: URLs, no script/iframe/style
      const unsafe = await reply.evaluate((root) => {
        const bad = [];
        for (const el of root.querySelectorAll('*')) {
          if (['SCRIPT', 'IFRAME', 'STYLE', 'IMG', 'OBJECT', 'EMBED'].includes(el.tagName.toUpperCase())) bad.push(el.tagName);
          for (const a of el.attributes) if (/^on/i.test(a.name) || /javascript:/i.test(a.value)) bad.push(`${el.tagName} ${a.name}`);
        }
        return bad;
      });
      assert.deepEqual(unsafe, []);
    });
  } finally {
    await mock.close();
  }
});
