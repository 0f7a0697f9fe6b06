// The composer: textarea (Enter sends, Shift+Enter new line), image tray with the per-turn caps gate
// (lib/caps.js pickTurnImages, storage-model §6.4), paste / drop / file-picker images, and a draft that
// survives panel reloads in chrome.storage.session (`composerDraft`, pictures too) and the browser
// closing in the host (the setting `composerDraft`: its text). What is being sent stays in the
// composer until the worker confirmed it; on any failure nothing is lost.

import { t } from '../lib/i18n.js';
import { pickTurnImages } from '../lib/caps.js';
import { h, iconButton, replaceChildren, debounce, readAsDataUrl } from '../lib/ui/dom.js';
import { DRAFT_KEY, draftToStore, draftFromStore, draftAfterSend, canSend, refusalNote } from './draft.js';

const sessionStore = () => globalThis.chrome?.storage?.session;

/** The host keeps the draft's text this long after the last keystroke (a send within it writes nothing). */
export const HOST_DRAFT_DELAY_MS = 2000;

/**
 * createComposer({form, input, tray, note, send, stop, fileInput, onSend, onStop, dropZone, getCaps, hostDraft})
 * onSend({text, images}) → Promise (rejects when the worker did not confirm).
 * getCaps() → the host's per-turn caps (`turnCaps(hello.limits)`), or null while the host has not said them.
 * hostDraft → `{load(): Promise<string>, save(text): Promise}`: the draft's text kept by the host
 * (the setting `composerDraft`), so it survives the browser closing; chrome.storage.session keeps the
 * whole draft, pictures too, for the browser session.
 */
export function createComposer({
  form, input, tray, note, send, stop, fileInput, dropZone, onSend, onStop, getCaps = () => null, hostDraft = null,
}) {
  let images = [];
  let sending = false;
  let streaming = false;
  let noteTimer = 0;

  // ---- note line ---------------------------------------------------------------------------
  function showNote(text, { sticky = false, kind = 'info' } = {}) {
    clearTimeout(noteTimer);
    note.textContent = text;
    note.dataset.kind = kind;
    note.hidden = !text;
    if (text && !sticky) noteTimer = setTimeout(() => { note.hidden = true; note.textContent = ''; }, 8000);
  }

  // ---- draft persistence -------------------------------------------------------------------
  const saveNow = async () => {
    const store = sessionStore();
    if (!store) return;
    const value = draftToStore({ text: input.value, images });
    try {
      if (value) await store.set({ [DRAFT_KEY]: value });
      else await store.remove(DRAFT_KEY);
    } catch (err) {
      console.warn('keepsake: could not keep the draft', err);
    }
  };
  let hostText = null; // the text the host holds (null: not known yet)
  const saveHost = async () => {
    if (!hostDraft) return;
    const text = input.value.trim() ? input.value : '';
    // an empty composer removes only a draft this panel wrote or restored, never one another
    // panel keeps there that this one has not seen
    if (text === hostText || (!text && !hostText)) return;
    try {
      await hostDraft.save(text);
      hostText = text;
    } catch (err) {
      console.warn('keepsake: the host could not keep the draft', err);
    }
  };
  const persistHost = debounce(saveHost, HOST_DRAFT_DELAY_MS);
  const session = debounce(saveNow, 300);
  const persist = Object.assign(() => { session(); persistHost(); }, {
    flush: () => { session.flush(); persistHost.flush(); },
  });
  // text typed just before the panel closes or reloads is kept too (the debounce may not fire)
  globalThis.addEventListener?.('pagehide', () => { saveNow(); saveHost(); });
  globalThis.document?.addEventListener?.('visibilitychange', () => {
    if (document.visibilityState === 'hidden') { saveNow(); persistHost.flush(); }
  });

  function apply(d) {
    if (d.text && !input.value) input.value = d.text;
    if (d.images.length && images.length === 0) addImages(d.images, { quiet: true });
    autosize();
    renderTray();
    updateButtons();
  }

  /**
   * The draft back: this browser session's (text and pictures) at once; when it has none, the
   * text the host kept (asked only then: a host that is missing must not hold up the session's).
   */
  async function restore() {
    const store = sessionStore();
    let d = { text: '', images: [] };
    try {
      if (store) d = draftFromStore((await store.get(DRAFT_KEY))?.[DRAFT_KEY]);
    } catch (err) {
      console.warn('keepsake: could not read the draft', err);
    }
    apply(d);
    if (!hostDraft || d.text || d.images.length) return;
    try {
      hostText = await hostDraft.load();
      if (hostText) apply({ text: hostText, images: [] });
    } catch (err) {
      console.warn('keepsake: could not read the draft the host kept', err);
    }
  }

  // ---- image tray --------------------------------------------------------------------------
  /**
   * Add one image if pickTurnImages keeps it next to the ones already in the tray (feeding images one
   * by one keeps exactly what pickTurnImages would keep, storage-model §6.4). → null | refusal reason
   */
  function gate(url) {
    const before = images.length;
    const r = pickTurnImages([...images, url], { caps: getCaps() });
    if (r.images.length === before + 1) {
      images = r.images;
      return null;
    }
    return (r.reasons && r.reasons[r.reasons.length - 1]) || 'budget';
  }

  function addImages(urls, { quiet = false } = {}) {
    let added = 0;
    const reasons = [];
    for (const url of urls) {
      const refusal = gate(url);
      if (refusal === null) added += 1;
      else reasons.push(refusal);
    }
    if (reasons.length && !quiet) showNote(refusalNote(reasons, getCaps()), { kind: 'warn', sticky: true });
    else if (added && note.dataset.kind === 'warn') showNote('');
    renderTray();
    updateButtons();
    persist();
    return added;
  }

  function removeImage(i) {
    images = images.filter((_, k) => k !== i);
    renderTray();
    updateButtons();
    persist();
    input.focus();
  }

  function renderTray() {
    replaceChildren(tray, images.map((url, i) => h('div', { class: 'tray-item', testid: 'tray-item' },
      h('img', { src: url, alt: t('composerImageToSend', i + 1) }),
      iconButton('x', t('msgRemoveImage', i + 1), { class: 'icon-btn tray-x', testid: 'tray-remove', on: { click: () => removeImage(i) } }))));
    tray.hidden = images.length === 0;
    tray.dataset.count = String(images.length);
  }

  async function addFiles(files) {
    const list = [...files].filter((f) => f && /^image\//i.test(f.type));
    if (list.length === 0) return 0;
    const urls = [];
    for (const f of list) {
      try { urls.push(await readAsDataUrl(f)); } catch (err) { showNote(t('composerImageUnreadable', f.name || t('composerTheImage'), err?.message || err), { kind: 'warn' }); }
    }
    return addImages(urls);
  }

  // ---- sending -----------------------------------------------------------------------------
  function updateButtons() {
    send.disabled = sending || streaming || !canSend({ text: input.value, images });
    send.setAttribute('aria-busy', sending ? 'true' : 'false');
    send.classList.toggle('busy', sending);
    stop.hidden = !streaming;
    form.dataset.state = streaming ? 'streaming' : sending ? 'sending' : 'idle';
  }

  async function submit() {
    if (sending || streaming) return;
    const draft = { text: input.value, images: [...images] };
    if (!canSend(draft)) {
      showNote(t('composerEmpty'));
      return;
    }
    const checked = pickTurnImages(draft.images, { caps: getCaps() });
    if (checked.images.length !== draft.images.length) {
      images = checked.images;
      renderTray();
      showNote(refusalNote(checked.reasons, getCaps()), { kind: 'warn', sticky: true });
      return;
    }
    sending = true;
    updateButtons();
    try {
      await onSend(draft);
      const after = draftAfterSend(draft, { text: input.value, images });
      input.value = after.text;
      images = after.images;
      renderTray();
      autosize();
      showNote('');
      persist.flush();
    } catch {
      // the caller explained the failure; the draft stays exactly as it is
    } finally {
      sending = false;
      updateButtons();
    }
  }

  function autosize() {
    input.style.height = 'auto';
    input.style.height = `${Math.min(input.scrollHeight, 220)}px`;
  }

  // ---- listeners ---------------------------------------------------------------------------
  form.addEventListener('submit', (e) => { e.preventDefault(); submit(); });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      submit();
    }
  });
  input.addEventListener('input', () => { offered = ''; autosize(); updateButtons(); persist(); });
  input.addEventListener('paste', (e) => {
    const files = [...(e.clipboardData?.items || [])].filter((it) => it.kind === 'file' && /^image\//i.test(it.type)).map((it) => it.getAsFile()).filter(Boolean);
    if (files.length) {
      e.preventDefault();
      addFiles(files);
    }
  });
  stop.addEventListener('click', () => onStop());
  fileInput.addEventListener('change', async () => {
    await addFiles(fileInput.files || []);
    fileInput.value = '';
  });
  const zone = dropZone || form;
  zone.addEventListener('dragover', (e) => {
    if ([...(e.dataTransfer?.types || [])].includes('Files') /* i18n-ok: a DataTransfer type */) {
      e.preventDefault();
      zone.classList.add('dragging');
    }
  });
  zone.addEventListener('dragleave', (e) => { if (e.target === zone) zone.classList.remove('dragging'); });
  zone.addEventListener('drop', (e) => {
    zone.classList.remove('dragging');
    if (e.dataTransfer?.files?.length) {
      e.preventDefault();
      addFiles(e.dataTransfer.files);
    }
  });

  renderTray();
  updateButtons();
  autosize();

  /** Put `text` in the composer when it is empty (a draft being written is never replaced). */
  let offered = ''; // the text offerText put there, while it is still there unchanged
  function offerText(text) {
    if (!text || input.value.trim()) return false;
    input.value = text;
    offered = text;
    autosize();
    updateButtons();
    persist();
    return true;
  }

  /**
   * The chat changed (New chat, another chat loaded): a prompt offerText put in the composer for
   * the chat it was offered in (a context-menu action's, about the quote attached there) goes,
   * unless the reader has changed it; it goes from the kept draft too. → true when it went.
   */
  function dropOffered() {
    const was = offered;
    offered = '';
    if (!was || input.value !== was || sending) return false;
    input.value = '';
    autosize();
    updateButtons();
    showNote('');
    persist();
    persist.flush();
    return true;
  }

  return {
    restore,
    offerText,
    dropOffered,
    addImages,
    addFiles,
    showNote,
    focus: () => input.focus(),
    setStreaming(v) { streaming = !!v; updateButtons(); },
    get images() { return [...images]; },
    get text() { return input.value; },
    get sending() { return sending; },
  };
}
