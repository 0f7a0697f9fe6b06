// The command line as a person sees it: chats made and deleted through the real host, then
// `keepsake-host trash` (Recently deleted) printed, checked, and rendered as a terminal picture
// for the README (docs/screenshots/cli-trash.png when KEEPSAKE_E2E_UPDATE_SCREENSHOTS=1; always
// to artifacts/screenshots/).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { HOST_BIN, CHROMIUM, ARTIFACTS, SCREENSHOTS, serveHost } from './harness.mjs';

const UPDATE = process.env.KEEPSAKE_E2E_UPDATE_SCREENSHOTS === '1';

const cli = (db, ...args) => execFileSync(HOST_BIN, ['--db', db, ...args], { encoding: 'utf8' });

async function chat(h, turns) {
  for (const [q, a] of turns) {
    await h.call('history.append', { entry: { role: 'user', content: q } });
    await h.call('history.append', { entry: { role: 'assistant', content: a } });
  }
  return (await h.call('history.meta')).activeSessionId;
}

test('keepsake-host trash lists what was deleted, restores it and purges it', { timeout: 60_000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-e2e-cli-'));
  const db = path.join(dir, 'keepsake.db');
  const h = serveHost(db);
  try {
    const trip = await chat(h, [
      ['Plan a three-day trip to Lisbon in March', 'Day 1: Alfama and the castle…'],
      ['Where should we eat on day 2?', 'Try the market hall in Cais do Sodré…'],
    ]);
    await h.call('sessions.rename', { id: trip, name: 'Lisbon trip' });
    await h.call('history.clear');
    const recipe = await chat(h, [
      ['A weeknight dal recipe?', 'Red lentils, cumin, garlic…'],
      ['Can I make it without tomatoes?', 'Yes: add a squeeze of lemon at the end…'],
    ]);
    await h.call('history.removeAt', { index: 3 });
    await h.call('history.clear');
    await chat(h, [['Summarise this PDF', 'The report finds…']]);
    await h.call('history.truncateFrom', { index: 1 });
    await h.call('history.clear');
    await h.call('sessions.delete', { id: trip });
  } finally {
    await h.close();
  }

  const out = cli(db, 'trash');
  assert.match(out, /Lisbon trip/);
  assert.match(out, /deleted\s+session/);
  assert.match(out, /from "A weeknight dal recipe\?" at entry 3/);
  assert.match(out, /3 item\(s\); kept 30 days/);
  const listed = JSON.parse(cli(db, 'trash', '--json')).items;
  assert.equal(listed.length, 3);

  // the picture for the README: the real output in a terminal-like page
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--headless=new'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1180, height: 300 }, deviceScaleFactor: 1 });
    const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
    await page.setContent(
      `<html><body style="margin:0;background:#1e1f22"><pre id="t" style="margin:0;padding:18px 22px;color:#e6e6e6;
       font:14px/1.45 'DejaVu Sans Mono',monospace;background:#1e1f22;width:max-content"><span style="color:#8fd18f">$</span> keepsake-host trash
${esc(out)}</pre></body></html>`,
    );
    const shot = await page.locator('#t').screenshot();
    assert.ok(shot.length > 10_000, `a real picture (${shot.length} bytes)`);
    for (const file of [path.join(ARTIFACTS, 'screenshots', 'cli-trash.png'), ...(UPDATE ? [path.join(SCREENSHOTS, 'cli-trash.png')] : [])]) {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, shot);
    }
  } finally {
    await browser.close();
  }

  // restore and purge from the command line
  const restored = cli(db, 'trash', 'restore', listed.find((i) => i.name === 'Lisbon trip').id);
  assert.match(restored, /restored .* \(session\)/);
  assert.match(cli(db, 'sessions'), /Lisbon trip/);
  assert.match(cli(db, 'trash', 'purge', '--all'), /purged 2 item\(s\) for good/);
  assert.match(cli(db, 'trash'), /\(the trash is empty\)/);
  fs.rmSync(dir, { recursive: true, force: true });
});
