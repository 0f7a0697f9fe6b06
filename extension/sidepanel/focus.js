// Keyboard focus is never dropped on <body> (issue 32): when the control that had the focus is
// re-rendered, disabled or hidden (Regenerate, ‹ / ›, Retry and Stop do that to themselves), the
// focus goes to the nearest sensible control instead: the control itself once it is enabled again
// (it was busy), the same control in the same message when it is back, the other version arrow, Stop while a reply is written, else the composer. A
// programmatic focus after a key press shows the focus ring (`:focus-visible`). The reader who
// clicks elsewhere or leaves the focus on <body> on purpose is left alone.

/** Whether `el` can take the focus now (connected, enabled, shown). */
export function canFocus(el) {
  return !!el && el.isConnected !== false && !el.disabled && !el.closest?.('[hidden]') && (el.getClientRects?.().length ?? 1) > 0;
}

/** What identifies a control across re-renders: its test id and the message index it is in. */
export function describeControl(el) {
  return {
    testid: el?.dataset?.testid || '',
    index: el?.closest?.('[data-testid="bubble"]')?.dataset?.index ?? null,
  };
}

const SIBLING = { 'version-prev': 'version-next', 'version-next': 'version-prev' };

/**
 * The control to focus instead of the lost one `{testid, index}`: the same control in the same
 * message, the other version arrow there, Stop, the composer (the first of these that can take it).
 * `find(selector)` → element | null (document.querySelector).
 */
export function replacementFor(lost, { find, stop, composer }) {
  const candidates = [];
  if (lost.testid && lost.index !== null) {
    const inBubble = (id) => find(`[data-testid="bubble"][data-index="${lost.index}"] [data-testid="${id}"]`);
    candidates.push(inBubble(lost.testid));
    if (SIBLING[lost.testid]) candidates.push(inBubble(SIBLING[lost.testid]));
  }
  candidates.push(stop, composer);
  return candidates.find(canFocus) || null;
}

/**
 * keepFocus({root, doc, stop, composer}): watch `root` (the panel) and put a lost focus back.
 */
export function keepFocus({ root, doc = document, stop, composer }) {
  let last = null; // the element that had the focus
  let lost = null; // what it was
  let waiting = false; // `last` lost the focus by being disabled while busy: it gets it back
  root.addEventListener('focusin', (e) => {
    last = e.target;
    lost = describeControl(last);
    waiting = false;
  });
  // a pointer press elsewhere is the reader's choice of focus
  doc.addEventListener('pointerdown', () => { last = null; lost = null; waiting = false; }, true);
  const check = () => {
    const active = doc.activeElement;
    if (!last || (active && active !== doc.body)) return;
    if (last.isConnected !== false && last.disabled && !last.closest?.('[hidden]')) {
      waiting = true; // busy (a version switch, a request): wait for it to be enabled or re-rendered
      return;
    }
    if (canFocus(last)) {
      if (waiting) last.focus(); // enabled again; otherwise the reader blurred it
      waiting = false;
      return;
    }
    waiting = false;
    const to = replacementFor(lost, { find: (s) => doc.querySelector(s), stop, composer });
    if (to) to.focus();
  };
  new MutationObserver(() => queueMicrotask(check)).observe(root, {
    subtree: true, childList: true, attributes: true, attributeFilter: ['disabled', 'hidden'],
  });
}
