// Issue 30, item 5: every link the panel draws goes through the one link rule (extension/lib/links.js).
// A crafted file imported with storage.import (the host operation the drawer's Import sends) holds a
// chat whose attach entries name `javascript:`, `file:`, `data:`, `chrome:` … pages and whose reply
// holds Markdown links and autolinks to the same addresses. Loaded in the real panel in Chromium:
// every chip with such an address shows its title as text (no <a>), the one https chip is a link, and
// no element of the panel has an href other than http(s) or mailto — read back from Chromium's own
// parsing of each href (`a.href`).
//
// On the extension before issue 30 (KEEPSAKE_E2E_EXT_DIR=/work/base/extension) every such chip was a
// link (`file:///etc/passwd` opened in a tab; `javascript:` stopped only by the CSP).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withKeepsake, waitFor, hostCall } from './harness.mjs';
import { tid, openDrawer, chips } from './panel.mjs';

const HOSTILE = [
  'javascript:alert(document.cookie)',
  'JaVaScRiPt:alert(1)',
  'file:///etc/passwd',
  'data:text/html,<script>alert(1)</script>',
  'vbscript:msgbox(1)',
  'chrome://settings/passwords',
  'blob:https://evil.example/2b7f1c1e-0000-4000-8000-000000000000',
  ' java\tscript:alert(1)',
];

function craftedDoc() {
  const attach = (i, url) => ({
    role: 'user',
    content: `[Page context attached by Keepsake]\nURL: ${url}\nTitle: Page ${i}\nMode: readable\n---\n\nbody ${i}`,
    attachId: `att-${i}`,
  });
  const history = [];
  [...HOSTILE, 'https://example.com/fine'].forEach((url, i) => history.push(attach(i, url)));
  history.push({ role: 'user', content: 'which links?' });
  history.push({
    role: 'assistant',
    content: [...HOSTILE.map((u, i) => `[link ${i}](${u.trim()}) <${u.trim()}>`), '[ok](https://example.com/ok) mailto:<x@example.com>'].join('\n\n'),
  });
  return { savedSessions: [{ id: 'links-1', name: 'Crafted links', createdAt: Date.now() - 60_000, pinned: false, history }] };
}

test('a crafted chat: chips with hostile addresses are text, and no href in the panel is other than http(s) or mailto', { timeout: 120_000 }, async (t) => {
  await withKeepsake(t, {}, async (k) => {
    const panel = await k.openPanel();
    await hostCall(panel, 'storage.import', { document: craftedDoc(), settings: 'none' });
    await openDrawer(panel);
    await waitFor(async () => (await panel.locator(`${tid('session-row')}[data-id="links-1"]`).count()) === 1, { timeoutMs: 10_000, what: 'the imported chat listed' });
    await panel.locator(`${tid('session-row')}[data-id="links-1"] ${tid('session-load')}`).click();
    await waitFor(async () => ((await chips(panel)).length === HOSTILE.length + 1 ? true : null), { timeoutMs: 15_000, what: 'the chips shown' });
    await waitFor(async () => ((await panel.locator('.msg-body a').count()) > 0 ? true : null), { timeoutMs: 15_000, what: 'the reply rendered' });

    const chipTitles = await panel.$$eval(`${tid('attach-chip')} .chip-title`, (els) => els.map((e) => ({ tag: e.localName, text: e.textContent, href: e.getAttribute('href') })));
    const links = chipTitles.filter((c) => c.tag === 'a');
    assert.deepEqual(links, [{ tag: 'a', text: `Page ${HOSTILE.length}`, href: 'https://example.com/fine' }], `only the https chip is a link: ${JSON.stringify(chipTitles)}`);
    // every element with an href, as Chromium parsed it
    const hrefs = await panel.$$eval('[href]', (els) => els.filter((e) => e.localName !== 'link').map((e) => ({ tag: e.localName, href: e.href, raw: e.getAttribute('href') })));
    const bad = hrefs.filter((x) => !/^(https?:\/\/[^/]|mailto:)/.test(x.href));
    assert.deepEqual(bad, [], `hrefs: ${JSON.stringify(hrefs)}`);
    // the reply: its https and mailto links are links (a bare https:// address inside the text of a
    // refused one, as in `blob:https://…`, is an ordinary web link); no refused address is one
    const replyLinks = await panel.$$eval('.msg-body a[href]', (els) => els.map((e) => e.href));
    for (const want of ['https://example.com/ok', 'mailto:x@example.com']) assert.ok(replyLinks.includes(want), `${want} in ${JSON.stringify(replyLinks)}`);
    for (const h of hrefs) assert.ok(!HOSTILE.some((u) => h.raw === u || h.raw === u.trim() || h.href === u.trim()), `a refused address became a link: ${JSON.stringify(h)}`);
    t.diagnostic(`chips: ${chipTitles.length} (${links.length} a link); hrefs in the panel: ${hrefs.length}, none outside http(s)/mailto`);
  });
});
