// The Firefox side of the end-to-end tests (firefox.e2e.mjs, ../sync.e2e.mjs): the Firefox build
// (scripts/firefox.mjs) in Debian's firefox-esr, driven over WebDriver BiDi by puppeteer-core (this
// folder's package.json: a test outside this folder that imports this module needs `npm ci` here,
// which run.sh does for firefox/ and sync.e2e.mjs), with the real keepsake-host registered by
// `keepsake-host install` for a test HOME (Firefox reads ~/.mozilla/native-messaging-hosts; the
// test's HOME holds ~/.mozilla/firefox, so install detects Firefox there).
//
// The sidebar page is opened as a tab (moz-extension://<uuid>/sidepanel/sidepanel.html, the uuid
// fixed with the extensions.webextensions.uuids pref); BiDi navigates to an extension page only
// with MOZ_REMOTE_ALLOW_SYSTEM_ACCESS set, which is set for this Firefox only.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import puppeteer from 'puppeteer-core';

import { build, GECKO_ID } from '../../../scripts/firefox.mjs';
import { HOST_BIN, ARTIFACTS, waitFor, withTimeout } from '../harness.mjs';
import { tid } from '../panel.mjs';

export { GECKO_ID };

export const FIREFOX = process.env.KEEPSAKE_E2E_FIREFOX || '/usr/bin/firefox-esr';
export const TMP = 'keepsake-ff-e2e-';

export function rmrf(p) {
  fs.rmSync(p, { recursive: true, force: true });
}

/** The Firefox build once, into a temp folder; `id` rewrites its add-on ID (test 3). */
export function buildAddon(id = GECKO_ID) {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP}addon-`));
  const manifest = build(out);
  if (id !== GECKO_ID) {
    manifest.browser_specific_settings.gecko.id = id;
    fs.writeFileSync(path.join(out, 'manifest.json'), JSON.stringify(manifest, null, 2));
  }
  return out;
}

/** A fixed moz-extension uuid per add-on ID (the pref Firefox reads on install). */
const uuidFor = (id) => (id === GECKO_ID ? '6b1d5c3e-4a2f-4c8e-9d7b-0000000000aa' : '6b1d5c3e-4a2f-4c8e-9d7b-0000000000bb');

/**
 * A test HOME with ~/.mozilla/firefox (Firefox "installed"), the host registered there by the
 * real `keepsake-host install`, and the database in `dataDir`.
 */
export function prepareHome({ dataDir, register = true }) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP}home-`));
  fs.mkdirSync(path.join(home, '.mozilla', 'firefox'), { recursive: true });
  const dbPath = path.join(dataDir, 'keepsake.db');
  const env = {
    ...process.env,
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    KEEPSAKE_DB: dbPath,
    KEEPSAKE_SECRET_STORE: 'off',
    // the system folders (/usr/lib/mozilla/…) the caller check reads: an empty tree of the test's
    KEEPSAKE_SYSTEM_ROOT: path.join(home, 'sysroot'),
  };
  let report = null;
  if (register) {
    const out = execFileSync(HOST_BIN, ['install', '--json'], { env, encoding: 'utf8' });
    report = JSON.parse(out);
  }
  return { home, env, dbPath, report, manifestPath: path.join(home, '.mozilla', 'native-messaging-hosts', 'dev.keepsake.host.json') };
}

/**
 * Launch firefox-esr (headless, BiDi) with `addonDir` installed as a temporary add-on.
 * @returns {Promise<{browser, addonId, uuid, openPanel: () => Promise<any>, openOptions: () => Promise<any>, close: () => Promise<void>, log: string[]}>}
 */
export async function launchFirefox({ env, addonDir, name }) {
  const log = [];
  const manifest = JSON.parse(fs.readFileSync(path.join(addonDir, 'manifest.json'), 'utf8'));
  const id = manifest.browser_specific_settings.gecko.id;
  const uuid = uuidFor(id);
  const browser = await withTimeout(
    puppeteer.launch({
      browser: 'firefox',
      executablePath: FIREFOX,
      protocol: 'webDriverBiDi',
      headless: true,
      env: { ...env, MOZ_REMOTE_ALLOW_SYSTEM_ACCESS: '1' },
      extraPrefsFirefox: {
        'extensions.webextensions.uuids': JSON.stringify({ [id]: uuid }),
        'browser.shell.checkDefaultBrowser': false,
      },
    }),
    60_000,
    `launching ${FIREFOX}`,
  );
  const addonId = await withTimeout(browser.installExtension(addonDir), 30_000, 'installing the add-on');
  const pages = [];
  const openPage = async (file, tag, ready) => {
    const page = await browser.newPage();
    pages.push(page);
    page.on('console', (m) => log.push(`[${tag} ${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => log.push(`[${tag} pageerror] ${e.message}`));
    const url = `moz-extension://${uuid}/${file}`;
    page.goto(url, { timeout: 60_000 }).catch(() => {});
    await waitFor(
      () => page.evaluate((u, sel) => location.href === u && document.readyState === 'complete' && !!document.querySelector(sel), url, ready).catch(() => false),
      { timeoutMs: 30_000, what: `${url} loaded` },
    );
    return page;
  };
  return {
    browser,
    addonId,
    uuid,
    log,
    /** The sidebar page as a tab. puppeteer's goto waits for a load event BiDi never reports for
     * extension pages, so the navigation is started and the document polled instead. */
    openPanel() {
      return openPage('sidepanel/sidepanel.html', 'panel', '[data-testid="composer-input"]');
    },
    /** The options page as a tab, once it has read what it shows (`html[data-ready]`). */
    openOptions() {
      return openPage('options/options.html', 'options', 'html[data-ready="true"]');
    },
    async close() {
      if (log.length) {
        fs.mkdirSync(path.join(ARTIFACTS, name), { recursive: true });
        fs.writeFileSync(path.join(ARTIFACTS, name, 'firefox-console.log'), log.join('\n'));
      }
      await withTimeout(browser.close(), 30_000, 'closing Firefox').catch(() => browser.process()?.kill('SIGKILL'));
    },
  };
}

/** Reload the panel tab (location.reload; puppeteer's reload waits for a load event BiDi does not
 * report for extension pages) and wait for the new document. */
export async function reloadPanel(page) {
  await page.evaluate(() => {
    window.__keepsakeOldDocument = true;
    setTimeout(() => location.reload(), 0);
  });
  await waitFor(
    () => page.evaluate(() => !window.__keepsakeOldDocument && document.readyState === 'complete' && !!document.querySelector('[data-testid="composer-input"]')).catch(() => false),
    { timeoutMs: 30_000, what: 'the reloaded panel' },
  );
}

/** Type into the composer and press Send (real input events over BiDi). */
export async function send(page, text) {
  await page.waitForSelector(`${tid('stop')}[hidden]`, { timeout: 30_000 });
  await page.type(tid('composer-input'), text);
  await page.waitForSelector(`${tid('send')}:not([disabled])`, { timeout: 30_000 });
  await page.click(tid('send'));
}
