// The UI's words, from the catalogue in `_locales/<locale>/messages.json` (chrome.i18n's format).
//
// Keepsake speaks English (`en`, the default locale), Simplified Chinese (`zh_CN`) and Brazilian
// Portuguese (`pt_BR`). Chrome picks the catalogue from the browser's UI language; `t()` asks
// `chrome.i18n.getMessage`, which is synchronous, so no page waits for its words. Outside a browser
// (node tests) the catalogue is read from disk: English unless a test calls `useLocale`.
//
//   t('actionTitle')                   → "Open Keepsake"
//   t('someKey', 3)                    → the message with $1 replaced by 3 ($1 … $9 are substitutions)
//   localize(document)                 fills [data-i18n], [data-i18n-title], [data-i18n-placeholder],
//                                      [data-i18n-aria-label] from the catalogue
//   uiLocale()                         → 'zh-CN': the BCP 47 tag dates and numbers are formatted with
//
// A key missing from the catalogue is a defect, not a blank: `t` returns the key itself so it shows,
// and `extension/lib/i18n.test.js` fails on any key used in the code that a locale lacks.

/** The locales Keepsake ships, as folder names under `_locales/`. */
export const LOCALES = Object.freeze(['en', 'zh_CN', 'pt_BR']);

/** The folder name for a BCP 47 language tag (`zh-Hans-CN` → `zh_CN`, `pt` → `pt_BR`); else `en`. */
export function localeFor(tag) {
  const t = String(tag || '').toLowerCase().replace(/_/g, '-');
  if (t === 'zh' || t.startsWith('zh-cn') || t.startsWith('zh-hans') || t.startsWith('zh-sg')) return 'zh_CN';
  if (t === 'pt' || t.startsWith('pt-')) return 'pt_BR';
  return 'en';
}

/** @type {{locale: string, messages: Record<string, {message: string}>} | null} */
let local = null;

/** Node tests only: read a locale's catalogue from disk and answer from it. */
export function useLocale(locale) {
  const fs = globalThis.process?.getBuiltinModule?.('fs');
  if (!fs) throw new Error('useLocale reads the catalogue from disk: node only');
  const url = new URL(`../_locales/${locale}/messages.json`, import.meta.url);
  local = { locale, messages: JSON.parse(fs.readFileSync(url, 'utf8')) };
}

function chromeI18n() {
  const i = globalThis.chrome?.i18n;
  return i && typeof i.getMessage === 'function' ? i : null;
}

/** The locale folder in use: `en`, `zh_CN` or `pt_BR`. */
export function currentLocale() {
  if (local) return local.locale;
  const i = chromeI18n();
  // each catalogue names itself: the one Chrome answers from is the UI language (`@@ui_locale` and
  // getUILanguage() can disagree with it, e.g. headless Chromium started with --lang)
  if (i) return LOCALES.includes(i.getMessage('localeCode')) ? i.getMessage('localeCode') : 'en';
  return 'en';
}

/** The BCP 47 tag for Intl formatting of dates and numbers in the UI language. */
export function uiLocale() {
  return { en: 'en', zh_CN: 'zh-CN', pt_BR: 'pt-BR' }[currentLocale()] || 'en';
}

function substitute(message, subs) {
  return message.replace(/\$([1-9])/g, (m, n) => (subs[n - 1] !== undefined ? String(subs[n - 1]) : m));
}

/**
 * The message for `key` in the UI language, with `$1`…`$9` replaced by `subs`.
 * @param {string} key
 * @param {...(string|number)} subs
 */
export function t(key, ...subs) {
  if (!local) {
    const i = chromeI18n();
    if (i) {
      const m = i.getMessage(key, subs.map(String));
      return m || key;
    }
    useLocale('en');
  }
  const entry = local.messages[key];
  return entry ? substitute(entry.message, subs) : key;
}

/** Attribute → `data-i18n-*` name, for `localize`. */
const ATTRS = Object.freeze({ title: 'i18nTitle', placeholder: 'i18nPlaceholder', 'aria-label': 'i18nAriaLabel' });

/**
 * Fill the static words of a page from the catalogue: an element's text from `data-i18n`, and its
 * title, placeholder and aria-label from `data-i18n-title`, `data-i18n-placeholder` and
 * `data-i18n-aria-label`. Sets `<html lang>` to the UI language.
 * @param {Document | Element} root
 */
export function localize(root) {
  const doc = root.ownerDocument || root;
  if (doc.documentElement) doc.documentElement.setAttribute('lang', uiLocale());
  for (const el of root.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const [attr, ds] of Object.entries(ATTRS)) {
    const sel = `[data-${attr === 'aria-label' ? 'i18n-aria-label' : `i18n-${attr}`}]`;
    for (const el of root.querySelectorAll(sel)) el.setAttribute(attr, t(el.dataset[ds]));
  }
}

/** A number in the UI language (`12,345` / `12.345`). */
export function formatNumber(n, options) {
  return new Intl.NumberFormat(uiLocale(), options).format(n);
}

/** A date and time in the UI language, e.g. for a session named by its date. */
export function formatDateTime(ms, options = { dateStyle: 'medium', timeStyle: 'short' }) {
  return new Intl.DateTimeFormat(uiLocale(), options).format(new Date(ms));
}
