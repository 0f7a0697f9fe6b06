// The side panel's first read, sent before anything else of the panel has loaded. A classic script
// (not a module), first in sidepanel.html's <head>, so it runs while the parser is still on the
// head: `history.get` is on its way to the worker and the host while the browser fetches and
// compiles sidepanel.js and its imports, instead of after them. It sends exactly the message
// lib/bridge.js `hostCall('history.get', {images: 'ref'})` sends (boot.test.js checks that);
// sidepanel.js turns the reply into the result or the error with bridge.js `replyToResult` and
// renders it. Changes that land between this read and the events port's greeting are caught by a
// `history.meta` check in sidepanel.js (changeSeq).
'use strict'; // i18n-ok: a directive

(() => {
  let history = null;
  try {
    history = chrome.runtime.sendMessage({ kind: 'host', op: 'history.get', args: { images: 'ref' }, opts: {} });
    history.catch(() => {}); // sidepanel.js reads it; an early failure is not an unhandled rejection
  } catch {
    history = null; // no extension context: sidepanel.js reads the usual way
  }
  /** `chrome.runtime.sendMessage`'s promise of the worker's `{ok, result | error}` reply, or null. */
  globalThis.keepsakeBoot = Object.freeze({ history });
})();
