// The in-browser way's side panel (benchmark scenario 6, test build only): the history comes from
// chrome.storage.local with its pictures as data URLs, and is shown by the real transcript
// component (sidepanel/messages.js, the same DOM as Keepsake's panel) with pictures as Blob URLs.

import { createMessageList } from '../sidepanel/messages.js';
import { parseDataUrl } from '../background/image-tokens.js';
import { base64ToBytes, readHistory } from './baseline.js';

/** Pictures for the transcript: a data URL becomes a Blob URL; nothing to fetch. */
const images = {
  async display(url) {
    const parts = parseDataUrl(url);
    if (!parts) return { link: url };
    return { src: URL.createObjectURL(new Blob([base64ToBytes(parts.data)], { type: parts.mime })), thumb: false };
  },
  full: async (url) => url,
  dataUrl: async (url) => url,
};

const $ = (id) => document.getElementById(id);
const messages = createMessageList({
  list: $('messages'),
  streamHost: $('stream-host'),
  scroller: $('scroller'),
  emptyState: $('empty-state'),
  images,
  actions: {},
});
messages.render(await readHistory());
