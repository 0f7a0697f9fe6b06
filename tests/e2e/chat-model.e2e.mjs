// Issue 30, item 4: stored data never changes the provider or the model by itself. Two provider
// cards made in Options ("Local", active, and "Cloud"); a chat answered by Local through the panel;
// then a crafted file imported through the drawer's Import whose chats' replies name the user's
// other card ("Cloud", by name, and once with an id that is no card of this installation) and an
// expensive model. Loading such a chat leaves `activeProvider` / `activeModel` as they were in the
// SQLite file and shows the offer "This chat was answered with Cloud · … — Use it"; pressing it
// switches. A chat this installation answered (its reply stamped with the card's id) still switches
// back by itself when it is loaded (each chat keeps its model, issue 21).
//
// On the extension before issue 30 (KEEPSAKE_E2E_EXT_DIR=/work/base/extension) loading the crafted
// chat silently stored Cloud and the file's model.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { withKeepsake, waitFor } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { tid, addProvider, openDrawer, sendAndAwaitReply, waitForBubbles } from './panel.mjs';
import { setting, activeSessionId } from './db.mjs';

const EXPENSIVE = 'o1-pro-crafted-expensive';
const DAY = 86_400_000;

/** The crafted file: a Keepsake dump whose chats' replies name the user's card "Cloud". */
function craftedFile(dir) {
  const chat = (id, name, providerKey) => ({
    id,
    name,
    createdAt: Date.now() - DAY,
    pinned: false,
    history: [
      { role: 'user', content: `question in ${name}` },
      { role: 'assistant', content: `answer in ${name}`, providerLabel: `Cloud · ${EXPENSIVE}`, providerKey },
    ],
  });
  const doc = {
    savedSessions: [
      chat('crafted-name', 'Crafted by name', { name: 'Cloud', model: EXPENSIVE }),
      chat('crafted-id', 'Crafted with an id', { name: 'Cloud', model: EXPENSIVE, id: 'a-card-id-the-file-made-up' }),
    ],
  };
  const file = path.join(dir, 'crafted.json');
  fs.writeFileSync(file, JSON.stringify(doc));
  return file;
}

async function loadChat(panel, id, text) {
  await openDrawer(panel);
  await panel.locator(`${tid('session-row')}[data-id="${id}"] ${tid('session-load')}`).click();
  await waitForBubbles(panel, (b) => b.some((x) => x.role === 'assistant' && x.text.includes(text)), { timeoutMs: 15_000, what: `the chat ${id} shown` });
  // loading a chat closes the drawer
  await panel.waitForSelector(`${tid('drawer')}[hidden]`, { state: 'attached', timeout: 10_000 });
}

test('an imported chat only offers its provider and model; a chat answered here switches back by itself', { timeout: 180_000 }, async (t) => {
  const mock = await startMockLlm({ script: { text: 'Answered locally.', chunkSize: 8 } });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-e2e-chat-model-'));
  try {
    await withKeepsake(t, {}, async (k) => {
      const opt = await k.openOptions();
      const local = await addProvider(opt, { name: 'Local', kind: 'chat', baseUrl: `${mock.url}/v1`, model: 'local-model' });
      const cloud = await addProvider(opt, { name: 'Cloud', kind: 'chat', baseUrl: 'https://cloud.invalid/v1', apiKey: 'sk-cloud-e2e', model: 'cheap-model' });
      await opt.close();
      assert.equal(setting(k, 'activeProvider'), local, 'the first card is the active one');
      assert.equal(setting(k, 'activeModel'), 'local-model');

      // a chat answered here: its reply carries the card's id (kept verbatim by the host; checked at the end)
      const panel = await k.openPanel();
      await waitFor(async () => ((await panel.innerText(tid('model-label'))) === 'Local · local-model' ? true : null), { timeoutMs: 10_000, what: 'the model label' });
      await sendAndAwaitReply(panel, 'a question for the local model', 'Answered locally.');
      const localChat = activeSessionId(k);
      const replyKey = () => k.sql(`SELECT entry FROM session_entries WHERE session_id = '${localChat}' AND branch_id IS NULL AND role = 'assistant' ORDER BY position`).map((r) => JSON.parse(r.entry).providerKey).at(-1);
      await waitFor(() => replyKey() ?? null, { timeoutMs: 10_000, what: 'the reply in its session' });
      await panel.click(tid('new-chat'));
      await waitForBubbles(panel, (b) => b.length === 0, { timeoutMs: 10_000, what: 'a new chat' });

      // the crafted file, through the drawer's Import (no settings in it: imported at once)
      await openDrawer(panel);
      await panel.setInputFiles(tid('import-json'), craftedFile(dir));
      await panel.waitForSelector(tid('import-result'), { timeout: 15_000 });
      await waitFor(async () => (await panel.locator(`${tid('session-row')}[data-id="crafted-id"]`).count()) === 1, { timeoutMs: 10_000, what: 'the imported chats listed' });

      for (const [id, name] of [['crafted-id', 'Crafted with an id'], ['crafted-name', 'Crafted by name']]) {
        await loadChat(panel, id, `answer in ${name}`);
        // whichever comes first: the offer, or (the old code) the provider switched in the file
        const first = await waitFor(async () => {
          if ((await panel.locator(tid('chat-model-offer')).count()) > 0) return 'offer';
          if (setting(k, 'activeProvider') !== local || setting(k, 'activeModel') !== 'local-model') return 'switched';
          return null;
        }, { timeoutMs: 15_000, what: `the offer of ${id}'s provider` });
        assert.deepEqual(
          { activeProvider: setting(k, 'activeProvider'), activeModel: setting(k, 'activeModel') },
          { activeProvider: local, activeModel: 'local-model' },
          `loading ${id} changed nothing in the database (${first})`,
        );
        const offer = panel.locator(tid('chat-model-offer'));
        assert.equal(await offer.locator(tid('chat-model-offer-text')).innerText(), `This chat was answered with Cloud · ${EXPENSIVE}.`);
        assert.equal(await panel.innerText(tid('model-label')), 'Local · local-model', 'the label still shows the model in use');
        if (id === 'crafted-id') {
          // reachable with the keyboard: focus the button, and leave it with Dismiss (Enter)
          await offer.locator(tid('chat-model-use')).focus();
          assert.equal(await panel.evaluate(() => document.activeElement?.dataset.testid), 'chat-model-use');
          await offer.locator(tid('notice-dismiss')).press('Enter');
          await waitFor(async () => ((await offer.count()) === 0 ? true : null), { timeoutMs: 5000, what: 'the offer dismissed' });
          assert.equal(setting(k, 'activeProvider'), local);
          continue;
        }
        // "Use it", pressed with the keyboard, switches
        await offer.locator(tid('chat-model-use')).press('Enter');
        await waitFor(async () => (setting(k, 'activeProvider') === cloud && setting(k, 'activeModel') === EXPENSIVE ? true : null), { timeoutMs: 10_000, what: 'the switch after Use it' });
        await waitFor(async () => ((await panel.innerText(tid('model-label'))) === `Cloud · ${EXPENSIVE}` ? true : null), { timeoutMs: 10_000, what: 'the label after Use it' });
        assert.match(await offer.innerText(), new RegExp(`This chat goes on with Cloud · ${EXPENSIVE}`));
      }

      // the chat answered here goes back to its own card and model by itself
      await loadChat(panel, localChat, 'Answered locally.');
      await waitFor(async () => (setting(k, 'activeProvider') === local && setting(k, 'activeModel') === 'local-model' ? true : null), { timeoutMs: 10_000, what: 'Local back in the database' });
      await waitFor(async () => ((await panel.innerText(tid('model-label'))) === 'Local · local-model' ? true : null), { timeoutMs: 10_000, what: 'the label back on Local' });
      assert.match(await panel.innerText(tid('composer-note')), /This chat goes on with Local · local-model/);
      assert.equal(await panel.locator(tid('chat-model-offer')).count(), 0, 'no offer for a chat answered here');
      assert.deepEqual(replyKey(), { name: 'Local', model: 'local-model', id: local }, 'the reply is stamped with the id of the card that wrote it');
    });
  } finally {
    await mock.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
