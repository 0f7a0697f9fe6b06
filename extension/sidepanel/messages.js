// The chat transcript: one bubble per stored entry (an index mirror, storage-model §9), attach entries
// as compact chips, and the streaming bubble of the in-flight reply. Model output goes through
// renderMarkdown (DOM nodes), user text through text nodes.

import { t } from '../lib/i18n.js';
import { renderMarkdown } from '../lib/markdown.js';
import { richHooks } from '../lib/rich.js';
import { h, icon, iconButton, replaceChildren } from '../lib/ui/dom.js';
import { entryKey, planReconcile } from './mirror.js';
import { displayParts, describeAttach, attachSize, lastAssistantIndex } from './entries.js';
import { entryText, isAttachEntry, newestVideoSrc } from '../lib/entries.js';
import { formatChars, shortUrl } from '../lib/ui/format.js';
import { safeHref } from '../lib/links.js';
import { DISPLAY_BATCH } from './images.js';
import {
  forksByIndex, stepVersion, versionLabel, keptAsVersionText, failedOf, failedText, lastUserIndex, earlierText,
} from '../lib/ui/keeps.js';

function providerText(entry) {
  if (typeof entry.providerLabel === 'string' && entry.providerLabel) return entry.providerLabel;
  const k = entry.providerKey;
  if (k && typeof k === 'object') return [k.name, k.model].filter((x) => typeof x === 'string' && x).join(' · ');
  return '';
}

/** What each element last rendered, so it can render again once its highlighting or math has come. */
const rendered = new WeakMap();

function markdownInto(el, text, pills) {
  rendered.set(el, { text, pills });
  // highlighting and math run in the rich worker: a block or formula not answered yet shows plain, and
  // this element renders again (if it still shows the same text) when the answers have come — unless they
  // all left their blocks plain: then only the pending marks go (a huge block is not laid out again)
  const again = ({ changed = true } = {}) => {
    const last = rendered.get(el);
    if (!el.isConnected || !last || last.text !== text) return;
    if (changed) markdownInto(el, last.text, last.pills);
    else for (const n of el.querySelectorAll('[data-md-pending]')) n.removeAttribute('data-md-pending');
  };
  try {
    replaceChildren(el, renderMarkdown(text, document, { pills, ...richHooks(again) }));
  } catch (err) {
    console.error('renderMarkdown failed', err);
    replaceChildren(el, h('div', { class: 'msg-text', text }));
  }
}

/**
 * createMessageList({list, streamHost, scroller, emptyState, earlierHost, images, actions})
 * actions: onCopy(text), onDelete(index), onResend(index, text, images) → Promise, onRegenerate(index),
 *          onUndoAttach(attachId, index), onSeek(seconds, tabId), loadInlineImages(index, key) → Promise<[dataUrl]>,
 *          onSwitchVersion(fork, version, button), onRetry(index, button), onLoadEarlier(button)
 */
export function createMessageList({ list, streamHost, scroller, emptyState, earlierHost = null, images, actions }) {
  /** @type {{key: string, entry: object, el: HTMLElement, index: number, editing?: boolean, fork?: object}[]} */
  let rows = [];
  let entries = [];
  let forks = new Map(); // live index → {forkEntryId, chosen, versions}
  let earlier = { entries: [], remaining: 0, from: 0, loading: false };
  let stream = null; // {id, text, el, body, raf, pills}
  let busyStream = false;

  // ---- scrolling ---------------------------------------------------------------------------
  // sidepanel.css makes the scroller a column-reverse flex box around one `.transcript` block: its
  // scroll origin is the bottom, so the transcript opens at the newest entry and stays pinned there
  // while content grows or the panel resizes, with no script and no forced layout (scrollTop is 0
  // at the bottom, negative above it; scroll anchoring keeps a scrolled-up view still). Without
  // that style (another page) the same functions scroll an ordinary box.
  let reversed = null;
  const isReversed = () => (reversed ??= getComputedStyle(scroller).flexDirection === 'column-reverse');
  /** Pixels between the bottom of the view and the end of the transcript (reads layout). */
  const fromBottom = () => (isReversed()
    ? -scroller.scrollTop
    : scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight);
  const nearBottom = () => fromBottom() < 80;
  const toBottom = () => { scroller.scrollTop = isReversed() ? 0 : scroller.scrollHeight; };
  let bottomFrame = 0;
  /** toBottom at the start of the next frame, where the layout it needs is done once anyway. */
  const toBottomSoon = () => {
    bottomFrame ||= requestAnimationFrame(() => { bottomFrame = 0; toBottom(); });
  };
  /**
   * After the content changed: back to the bottom when the view was `gap` px from it and within
   * reach (or `force`). A reversed scroller that was at the bottom is still there: nothing to do.
   */
  function keepBottom(gap, force = false) {
    if (!(force || gap < 80)) return;
    if (!isReversed()) toBottom();
    else if (gap >= 1) toBottomSoon();
  }

  // ---- images ------------------------------------------------------------------------------
  // A picture is fetched only after the transcript has painted (`queueImage`), newest first and at
  // most IMAGE_FETCHES at a time: text never waits for pictures, the transfers do not compete with
  // the first layout for the CPU, and the pictures in view on open (the newest) come first. The
  // pictures one pump starts ask for their display renditions in one batched `images.display` call
  // (images.js); the cap keeps a long history from asking for every picture at once.
  const IMAGE_FETCHES = DISPLAY_BATCH;
  const imageJobs = [];
  let imageFetches = 0;
  let imageWake = 0;

  function queueImage(job) {
    imageJobs.push(job);
    if (imageWake) return;
    if (document.visibilityState === 'hidden') imageWake = setTimeout(pumpImages, 0);
    else imageWake = requestAnimationFrame(() => { imageWake = setTimeout(pumpImages, 0); });
  }

  function pumpImages() {
    imageWake = 0;
    while (imageFetches < IMAGE_FETCHES && imageJobs.length) {
      const job = imageJobs.pop(); // the newest bubble's picture
      if (!job.wrap.isConnected) continue; // its bubble is gone
      imageFetches += 1;
      showImage(job).finally(() => {
        imageFetches -= 1;
        pumpImages();
      });
    }
  }

  function showImage({ url, n, img, wrap }) {
    return images.display(url).then((d) => {
      wrap.classList.remove('loading');
      if (d.link) {
        // the one link rule (lib/links.js): an address it refuses is shown as text
        const text = t('msgImageLink', n, shortUrl(d.link));
        wrap.replaceWith(safeHref(d.link)
          ? h('a', { class: 'msg-image-link', href: d.link, target: '_blank', rel: 'noreferrer noopener', text })
          : h('span', { class: 'msg-image-link', text }));
      } else {
        if (!isReversed() && nearBottom()) img.addEventListener('load', toBottom, { once: true });
        img.src = d.src;
      }
    }).catch((err) => {
      wrap.classList.remove('loading');
      wrap.replaceWith(h('span', { class: 'msg-image-missing', text: t('msgImageUnavailableWhy', n, err?.message || t('panelUnknownError')) }));
    });
  }

  /** A bubble picture; `original` (the part's `originalUrl`) is what the lightbox opens, if set. */
  function imageNode(url, n, original) {
    const img = h('img', { class: 'msg-image', alt: t('msgImage', n), testid: 'bubble-image', decoding: 'async' });
    const wrap = h('button', {
      type: 'button', class: 'msg-image-btn loading', 'aria-label': t('msgOpenImage', n),
      on: { click: () => openLightbox(url, n, original) },
    }, img);
    // a tall picture (a full-page screenshot) is shown from its top at the bubble's width, not as a
    // sliver; the lightbox shows it at the panel's width, scrolling
    img.addEventListener('load', () => { if (isTall(img)) wrap.classList.add('tall'); });
    queueImage({ url, n, img, wrap });
    return wrap;
  }

  /** A label (`[image 2]`) that replaced a picture whose original is kept: opens it in the lightbox. */
  function labelNode(text, n, original) {
    return h('button', {
      type: 'button', class: 'msg-image-label', testid: 'bubble-image-label', text,
      'aria-label': t('msgOpenImage', n), on: { click: () => openLightbox(null, n, original) },
    });
  }

  /** Taller than 2.5 times its width: a page-long screenshot. */
  const isTall = (img) => img.naturalWidth > 0 && img.naturalHeight > 2.5 * img.naturalWidth;

  let lightbox = null;
  let lightboxRevoke = null;
  /**
   * Show a picture full size. With `original` (storage-model §12.8) the lightbox fetches that
   * reference with `images.get`, so it shows the kept original, not the bubble's thumbnail.
   */
  async function openLightbox(url, n, original) {
    closeLightbox();
    const img = h('img', { alt: t('msgImage', n) });
    const close = iconButton('x', t('msgCloseImage'), { testid: 'lightbox-close', on: { click: closeLightbox } });
    const box = h('div', {
      class: 'lightbox', testid: 'lightbox', role: 'dialog', 'aria-label': t('msgImage', n), tabindex: '-1',
      on: {
        click: (e) => { if (e.target === box) closeLightbox(); },
        keydown: (e) => { if (e.key === 'Escape') closeLightbox(); },
      },
    }, close, img);
    lightbox = box;
    img.addEventListener('load', () => { if (isTall(img)) box.classList.add('tall'); });
    document.body.append(lightbox);
    lightbox.focus();
    try {
      if (original) {
        const o = await images.original(original);
        if (lightbox !== box) { o.revoke(); return; }
        lightboxRevoke = o.revoke;
        img.src = o.src;
      } else {
        img.src = await images.full(url);
      }
    } catch { img.alt = t('msgImageUnavailable', n); }
  }
  function closeLightbox() {
    if (lightbox) { lightbox.remove(); lightbox = null; }
    if (lightboxRevoke) { lightboxRevoke(); lightboxRevoke = null; }
  }

  // ---- rows --------------------------------------------------------------------------------
  function buildAttachChip(row, { readOnly = false } = {}) {
    const a = describeAttach(row.entry);
    const label = a.mode === 'screenshot' ? t('msgScreenshot') : a.title || shortUrl(a.url) || t('msgAttachedPage');
    const size = attachSize(a, formatChars);
    const undo = readOnly ? null : a.attachId
      ? iconButton('x', t('msgRemoveAttached'), { class: 'icon-btn chip-x', testid: 'attach-undo', on: { click: () => actions.onUndoAttach(a.attachId, row.index, undo) } })
      : iconButton('x', t('msgRemoveEntry'), { class: 'icon-btn chip-x', testid: 'attach-delete', on: { click: () => actions.onDelete(row.index, undo) } });
    // the page's address is data (an imported file can say anything): a link only when the one
    // link rule admits it (lib/links.js: http, https, mailto), else the title as text
    const title = safeHref(a.url)
      ? h('a', { class: 'chip-title', href: a.url, target: '_blank', rel: 'noreferrer noopener', title: a.url, text: label })
      : h('span', { class: 'chip-title', title: typeof a.url === 'string' && a.url ? a.url : undefined, text: label });
    return h('div', {
      class: `chip${readOnly ? ' msg-earlier' : ''}`, testid: readOnly ? 'earlier-chip' : 'attach-chip', role: 'group', 'aria-label': t('msgAttachedLabel', label),
      dataset: readOnly ? { position: row.position, role: 'user', kind: 'attach' } : { index: row.index, role: 'user', kind: 'attach', attachId: a.attachId || undefined },
    },
    h('span', { class: 'chip-icon' }, icon(a.mode === 'screenshot' ? 'camera' : 'page')),
    h('span', { class: 'chip-main' },
      title,
      h('span', { class: 'chip-info', testid: 'attach-info' },
        a.url ? h('span', { class: 'chip-url', text: shortUrl(a.url) }) : null,
        a.url ? h('span', { class: 'chip-sep', text: ' · ' }) : null,
        h('span', { class: 'chip-size', text: size })),
      a.summarized ? h('span', { class: 'badge badge-muted', testid: 'summarized-badge', text: t('msgCondensed') }) : null),
    undo);
  }

  function buildBubble(row, { readOnly = false } = {}) {
    const { entry } = row;
    const role = entry.role === 'assistant' ? 'assistant' : 'user';
    const body = h('div', { class: 'msg-body' });
    const pills = role === 'assistant' && !!entry.videoSrc;
    for (const part of displayParts(entry)) {
      if (part.kind === 'image') body.append(imageNode(part.url, part.n, part.original));
      else if (part.kind === 'label') body.append(labelNode(part.text, part.n, part.original));
      else if (role === 'assistant') { const md = h('div', { class: 'md' }); markdownInto(md, part.text, pills); body.append(md); }
      else body.append(h('div', { class: 'msg-text', text: part.text }));
    }
    const failed = failedOf(entry);
    const failedMark = failed
      ? h('div', { class: 'failed-mark', testid: 'failed-mark', role: 'note' },
        h('span', { class: 'failed-text', text: failedText(failed) }),
        readOnly ? null : h('button', {
          type: 'button', class: 'btn btn-small retry', testid: 'retry', text: t('msgRetry'), title: t('msgRetryTitle'),
          on: { click: (e) => actions.onRetry?.(row.index, e.currentTarget) },
        }))
      : null;
    const metaBits = [];
    if (entry.interrupted === true) metaBits.push(h('span', { class: 'badge badge-warn', testid: 'interrupted-badge', text: t('msgInterrupted') }));
    const prov = role === 'assistant' ? providerText(entry) : '';
    if (prov) metaBits.push(h('span', { class: 'msg-provider', text: prov }));
    const actionsBar = h('div', { class: 'msg-actions', role: 'toolbar', 'aria-label': t('msgActions') },
      iconButton('copy', t('msgCopy'), { testid: 'msg-copy', on: { click: (e) => actions.onCopy(entryText(row.entry), e.currentTarget) } }),
      !readOnly && role === 'user' ? iconButton('edit', t('msgEditResend'), { testid: 'msg-edit', on: { click: () => startEdit(row) } }) : null,
      !readOnly && role === 'assistant' ? iconButton('refresh', t('msgRegenerate'), { testid: 'msg-regenerate', class: 'icon-btn regen', on: { click: (e) => actions.onRegenerate(row.index, e.currentTarget) } }) : null,
      readOnly ? null : iconButton('trash', t('msgDelete'), { testid: 'msg-delete', on: { click: (e) => actions.onDelete(row.index, e.currentTarget) } }));
    const foot = h('div', { class: 'msg-foot' }, metaBits.length ? h('div', { class: 'msg-meta' }, metaBits) : null, actionsBar);
    const el = h('article', {
      class: `msg msg-${role}${readOnly ? ' msg-earlier' : ''}`, testid: readOnly ? 'earlier-bubble' : 'bubble', 'aria-label': role === 'user' ? t('msgYou') : t('msgAssistant'),
      dataset: readOnly
        ? { role, position: row.position, failed: failed ? 'true' : undefined }
        : { role, index: row.index, interrupted: entry.interrupted === true ? 'true' : undefined, failed: failed ? 'true' : undefined },
    },
    body,
    failedMark,
    foot);
    row.foot = foot;
    return el;
  }

  /**
   * The "‹ n / m ›" controls of a turn that has other versions (Regenerate, Edit & resend keep
   * what they replace): shown in the bubble's foot, always visible.
   */
  function versionControls(row, fork) {
    const { text, label } = versionLabel(fork);
    const prev = stepVersion(fork, -1);
    const next = stepVersion(fork, +1);
    const go = (v) => (e) => { if (v) actions.onSwitchVersion?.(fork, v, e.currentTarget); };
    return h('div', { class: 'msg-meta msg-versions', testid: 'versions', role: 'group', 'aria-label': row.entry.role === 'assistant' ? t('msgVersionsReply') : t('msgVersionsMessage') },
      h('button', { type: 'button', class: 'icon-btn ver-btn', testid: 'version-prev', text: '‹', disabled: !prev, 'aria-label': prev ? t('msgShowVersion', prev, fork.versions) : t('msgNoEarlierVersion'), title: t('msgPrevVersion'), on: { click: go(prev) } }),
      h('span', { class: 'version-label', testid: 'version-label', 'aria-label': label, title: label, text }),
      h('button', { type: 'button', class: 'icon-btn ver-btn', testid: 'version-next', text: '›', disabled: !next, 'aria-label': next ? t('msgShowVersion', next, fork.versions) : t('msgNoLaterVersion'), title: t('msgNextVersion'), on: { click: go(next) } }));
  }

  /** Put a row's version controls in step with its fork (none, or n / m). */
  function decorate(row) {
    const fork = forks.get(row.index) || null;
    const same = (a, b) => (!a && !b) || (!!a && !!b && a.forkEntryId === b.forkEntryId && a.chosen === b.chosen && a.versions === b.versions);
    if (!same(row.fork, fork)) {
      row.versionsEl?.remove();
      row.versionsEl = fork && row.foot ? versionControls(row, fork) : null;
      if (row.versionsEl) row.foot.prepend(row.versionsEl);
    }
    row.fork = fork;
    const regen = row.el.querySelector('.regen');
    if (regen) regen.title = t('msgRegenerateKept', keptAsVersionText(fork));
  }

  function buildRow(row) {
    row.el = isAttachEntry(row.entry) ? buildAttachChip(row) : buildBubble(row);
    return row;
  }

  // ---- edit & resend -----------------------------------------------------------------------
  async function startEdit(row) {
    if (row.editing || stream) return;
    row.editing = true;
    const el = row.el;
    el.classList.add('editing');
    const ta = h('textarea', { class: 'edit-input', testid: 'edit-input', 'aria-label': t('msgEdit'), rows: 3 });
    ta.value = entryText(row.entry);
    const tray = h('div', { class: 'tray edit-tray', testid: 'edit-image-tray' });
    const status = h('div', { class: 'edit-status', testid: 'edit-status', role: 'status', text: keptAsVersionText(row.fork) });
    let imgs = [];
    const renderTray = () => {
      replaceChildren(tray, imgs.map((url, i) => h('div', { class: 'tray-item' },
        h('img', { src: url, alt: t('msgImage', i + 1) }),
        iconButton('x', t('msgRemoveImage', i + 1), { class: 'icon-btn tray-x', testid: 'edit-image-remove', on: { click: () => { imgs.splice(i, 1); renderTray(); } } }))));
      tray.hidden = imgs.length === 0;
    };
    const save = h('button', { type: 'button', class: 'btn btn-primary btn-small', testid: 'edit-save', text: t('msgSaveResend') });
    const cancel = h('button', { type: 'button', class: 'btn btn-small', testid: 'edit-cancel', text: t('drawerCancel') });
    const editor = h('div', { class: 'editor', testid: 'editor' }, ta, tray, status, h('div', { class: 'editor-bar' }, cancel, save));
    const finish = () => { row.editing = false; editor.remove(); el.classList.remove('editing'); };
    cancel.addEventListener('click', finish);
    const doSave = async () => {
      if (save.disabled) return;
      if (!ta.value.trim() && imgs.length === 0) { status.textContent = t('msgEditEmpty'); return; }
      save.disabled = true;
      save.setAttribute('aria-busy', 'true');
      status.textContent = t('msgSending');
      try {
        await actions.onResend(row.index, ta.value, imgs);
        finish();
      } catch (err) {
        status.textContent = t('msgEditNotSent', err?.message || err);
      } finally {
        save.disabled = false;
        save.removeAttribute('aria-busy');
      }
    };
    save.addEventListener('click', doSave);
    ta.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); doSave(); }
      else if (e.key === 'Escape') { e.preventDefault(); finish(); }
    });
    el.append(editor);
    renderTray();
    ta.focus();
    try {
      imgs = await actions.loadInlineImages(row.index, row.key);
      renderTray();
    } catch (err) {
      status.textContent = t('msgImagesUnreadable', err?.message || err);
      save.disabled = true;
    }
  }

  // ---- reconcile ---------------------------------------------------------------------------
  function refreshActions() {
    // Regenerate the newest reply when nothing follows it (what it replaces is kept as a version).
    const last = lastAssistantIndex(entries);
    const regenIndex = last === entries.length - 1 ? last : -1;
    // Retry only the last message, when it was not answered.
    const retryIndex = lastUserIndex(entries, isAttachEntry);
    for (const r of rows) {
      const regen = r.el.querySelector('.regen');
      if (regen) regen.hidden = r.index !== regenIndex || !!stream || busyStream;
      const edit = r.el.querySelector('[data-testid="msg-edit"]');
      if (edit) edit.hidden = !!stream;
      const retry = r.el.querySelector('[data-testid="retry"]');
      if (retry) retry.hidden = r.index !== retryIndex || !!stream || busyStream;
      for (const b of r.el.querySelectorAll('.ver-btn')) b.classList.toggle('locked', !!stream);
    }
  }

  /**
   * Render the stored list; returns {kind, reused, added}. `meta`: `{forks, offset, before}` from
   * history.get (forks of the live chat; `before` = entryId of the entry ahead of the window).
   */
  function render(newEntries, meta = {}) {
    forks = forksByIndex(newEntries, meta.forks, { offset: meta.offset || 0, before: meta.before || '' });
    const gap = fromBottom(); // read before the DOM changes, while the layout is still clean
    const keys = newEntries.map(entryKey);
    const plan = planReconcile(rows.map((r) => r.key), keys);
    const keep = new Set(plan.reuse.filter((j) => j >= 0));
    rows.forEach((r, j) => { if (!keep.has(j)) r.el.remove(); });
    const next = keys.map((key, i) => {
      const j = plan.reuse[i];
      if (j >= 0) {
        const r = rows[j];
        r.index = i;
        r.el.dataset.index = String(i);
        return r;
      }
      return buildRow({ key, entry: newEntries[i], index: i, el: null });
    });
    next.forEach((r, i) => {
      if (list.children[i] !== r.el) list.insertBefore(r.el, list.children[i] || null);
    });
    while (list.children.length > next.length) list.lastElementChild.remove();
    rows = next;
    entries = newEntries;
    for (const r of rows) decorate(r);
    if (stream) stream.pills = !!newestVideoSrc(entries);
    refreshActions();
    updateEmpty();
    keepBottom(gap, plan.kind === 'reset');
    return { kind: plan.kind, reused: plan.reused, added: next.length - plan.reused };
  }

  function updateEmpty() {
    if (emptyState) emptyState.hidden = rows.length > 0 || !!stream || earlier.remaining > 0 || earlier.entries.length > 0;
  }

  // ---- earlier messages (read-only, above the live window) ---------------------------------
  /**
   * The part of a long chat ahead of the live window (docs/keeps.md "The live window"):
   * `entries` already read (body positions `from` …), `remaining` not read yet. Read-only: Copy
   * only, no edit, delete, regenerate or version switching.
   */
  function setEarlier({ entries: older = [], from = 0, remaining = 0, loading = false } = {}) {
    earlier = { entries: older, from, remaining, loading };
    if (!earlierHost) return;
    const gap = fromBottom();
    const button = remaining > 0
      ? h('button', {
        type: 'button', class: 'btn btn-small earlier-button', testid: 'earlier-messages',
        text: loading ? t('msgLoading') : earlierText(remaining), 'aria-busy': loading ? 'true' : undefined, disabled: loading,
        title: t('msgEarlierTitle'), on: { click: (e) => actions.onLoadEarlier?.(e.currentTarget) },
      })
      : null;
    const shown = older.length
      ? h('div', { class: 'earlier-list', testid: 'earlier-list', role: 'log', 'aria-label': t('msgEarlierLabel') },
        h('div', { class: 'earlier-head', testid: 'earlier-head', text: t('msgEarlierHead') }),
        older.map((entry, i) => {
          const row = { entry, position: from + i, index: -1 };
          return isAttachEntry(entry) ? buildAttachChip(row, { readOnly: true }) : buildBubble(row, { readOnly: true });
        }),
        h('div', { class: 'earlier-foot', text: t('msgCurrentMessages') }))
      : null;
    replaceChildren(earlierHost, button, shown);
    earlierHost.hidden = !button && !shown;
    updateEmpty();
    keepBottom(gap);
  }

  // ---- streaming ---------------------------------------------------------------------------
  function startStream(id, text = '') {
    if (stream && stream.id === id) return stream;
    endStream();
    const gap = fromBottom();
    const body = h('div', { class: 'msg-body md' });
    const typing = h('span', { class: 'typing', 'aria-label': t('msgTyping') }, h('i'), h('i'), h('i'));
    const el = h('article', {
      class: 'msg msg-assistant streaming', testid: 'bubble', 'aria-live': 'polite', 'aria-busy': 'true',
      dataset: { role: 'assistant', streaming: 'true', streamId: id },
    }, body, typing);
    streamHost.prepend(el);
    stream = { id, text: '', el, body, typing, raf: 0, pills: !!newestVideoSrc(entries) };
    if (text) setStreamText(text);
    refreshActions();
    updateEmpty();
    keepBottom(gap, true);
    return stream;
  }

  function flush() {
    if (!stream) return;
    stream.raf = 0;
    const gap = fromBottom();
    markdownInto(stream.body, stream.text, stream.pills);
    stream.typing.hidden = stream.text.length > 0;
    // in a frame already, so no deferral; a reversed scroller at the bottom stays there by itself
    if (gap < 80 && !(isReversed() && gap < 1)) toBottom();
  }
  function schedule() {
    if (stream && !stream.raf) stream.raf = requestAnimationFrame(flush);
  }
  function appendDelta(id, delta) {
    if (!stream || stream.id !== id) return false;
    stream.text += delta;
    schedule();
    return true;
  }
  function setStreamText(text) {
    if (!stream) return;
    stream.text = text;
    schedule();
  }
  function endStream() {
    if (!stream) return;
    if (stream.raf) cancelAnimationFrame(stream.raf);
    stream.el.remove();
    stream = null;
    refreshActions();
    updateEmpty();
  }

  // ---- notices -----------------------------------------------------------------------------
  /**
   * A card where notices go. `cause`: the error code it is about (e.g. `no_provider`), so that
   * clearNotices({cause}) takes it away once that cause is gone.
   */
  function notice(text, { kind = 'error', detail = '', testid = 'chat-notice', cause = '' } = {}) {
    const el = h('div', { class: `notice notice-${kind}`, testid, role: kind === 'error' ? 'alert' : 'status', 'data-cause': cause || undefined },
      h('div', { class: 'notice-text' }, h('strong', { text }), detail ? h('div', { class: 'notice-detail', text: detail }) : null),
      iconButton('x', t('msgDismiss'), { testid: 'notice-dismiss', on: { click: () => el.remove() } }));
    const gap = fromBottom();
    streamHost.append(el);
    keepBottom(gap, true);
    return el;
  }
  /** Show a notice element built elsewhere (e.g. evicted.js) where notices go. */
  function addNotice(el) {
    const gap = fromBottom();
    streamHost.append(el);
    keepBottom(gap, true);
    return el;
  }
  /** Remove the notices (only those about `cause` when given). */
  function clearNotices({ cause = '' } = {}) {
    for (const n of [...streamHost.querySelectorAll('.notice')]) {
      if (!cause || n.dataset.cause === cause) n.remove();
    }
  }

  // ---- pills -------------------------------------------------------------------------------
  scroller.addEventListener('click', (e) => {
    const copyBtn = e.target.closest && e.target.closest('[data-md-copy]');
    if (copyBtn) {
      const code = copyBtn.closest('.md-codeblock')?.querySelector('pre code');
      if (code) actions.onCopy(code.textContent || '', copyBtn);
      return;
    }
    const pill = e.target.closest && e.target.closest('.ts-pill, .md-pill, button[data-seconds]');
    if (!pill) return;
    e.preventDefault();
    const seconds = Number(pill.dataset.seconds);
    if (!Number.isFinite(seconds)) return;
    const bubble = pill.closest('[data-testid="bubble"]');
    let tabId;
    if (bubble && bubble.dataset.streaming) tabId = newestVideoSrc(entries)?.tabId;
    else {
      const r = rows.find((x) => x.el === bubble);
      tabId = r?.entry?.videoSrc?.tabId;
    }
    actions.onSeek(seconds, typeof tabId === 'number' ? tabId : undefined);
  });

  return {
    render,
    startStream,
    appendDelta,
    setStreamText,
    endStream,
    notice,
    addNotice,
    clearNotices,
    closeLightbox,
    setEarlier,
    get earlier() { return earlier; },
    get stream() { return stream; },
    get entries() { return entries; },
    forkAt(i) { return forks.get(i) || null; },
    get length() { return rows.length; },
    setBusy(b) { busyStream = b; refreshActions(); },
    rowAt(i) { return rows[i]; },
  };
}
