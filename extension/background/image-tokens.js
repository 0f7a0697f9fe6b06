// Image tokens in request bodies (PROTOCOL.md "imageRefs"): an image reference
// (`keepsake-image:sha256:<hex>`) or a turn placeholder (`keepsake-turn-image:<i>`) stands where a
// picture goes; the worker finds them and fills in the bytes it holds before the provider call.

import { t } from '../lib/i18n.js';
import { IMAGE_REF_PREFIX } from '../lib/entries.js';
import { codeError } from './errors.js';

/** Placeholder of the i-th image of this turn's message (request.build `turn.images`). */
export const TURN_TOKEN_PREFIX = 'keepsake-turn-image:';

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** `data:<mime>[;params];base64,<data>` → `{mime (lower-case), data}`, else null. */
export function parseDataUrl(url) {
  if (typeof url !== 'string') return null;
  const m = /^data:([^;,]+)((?:;[^;,]*)*?);base64,(.*)$/is.exec(url.trim());
  if (!m || !/^image\//i.test(m[1])) return null;
  return { mime: m[1].toLowerCase(), data: m[3] };
}

const TOKEN_RE = /^(?:keepsake-image:sha256:[0-9a-f]{64}|keepsake-turn-image:\d+)$/;

/** An image reference or a turn placeholder (the whole string). */
function isImageToken(s) {
  return typeof s === 'string' && TOKEN_RE.test(s);
}

/** Every image token (reference or turn placeholder) found in a JSON value. */
export function collectTokens(value, out = new Set()) {
  if (typeof value === 'string') {
    if (isImageToken(value)) out.add(value);
  } else if (Array.isArray(value)) {
    for (const v of value) collectTokens(v, out);
  } else if (isObject(value)) {
    for (const v of Object.values(value)) collectTokens(v, out);
  }
  return out;
}

/**
 * PROTOCOL.md "imageRefs": a string equal to a token becomes `data:<mime>;base64,<data>`; an
 * Anthropic `source` `{type: "base64", data: <token>}` gets the bare base64. `images` maps each
 * token to `{mime, data}`. Returns a new value; throws if a token is unknown.
 */
export function fillImageTokens(value, images) {
  const look = (tok) => {
    const img = images instanceof Map ? images.get(tok) : images[tok];
    if (!img) throw codeError('image_unavailable', t('bgImageNoBytes', tok));
    return img;
  };
  const walk = (v) => {
    if (typeof v === 'string') {
      if (!isImageToken(v)) return v;
      const img = look(v);
      return `data:${img.mime};base64,${img.data}`;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (isObject(v)) {
      if (v.type === 'base64' && isImageToken(v.data)) return { ...v, data: look(v.data).data };
      const o = {};
      for (const [k, x] of Object.entries(v)) o[k] = walk(x);
      return o;
    }
    return v;
  };
  return walk(value);
}

/** Whether a request body (or entry) carries any image part, pixels or tokens. */
export function bodyHasImages(value) {
  if (Array.isArray(value)) return value.some(bodyHasImages);
  if (!isObject(value)) return false;
  if (value.type === 'image_url' || value.type === 'input_image' || value.type === 'image') return true;
  return Object.values(value).some((v) => typeof v === 'object' && bodyHasImages(v));
}

/** Whether a body's JSON text may hold an image token (any occurrence: a superset of collectTokens). */
export function textHasTokens(text) {
  return text.includes(IMAGE_REF_PREFIX) || text.includes(TURN_TOKEN_PREFIX);
}

const IMAGE_PART_TEXT = /"type"\s*:\s*"(?:image_url|input_image|image)"/;

/**
 * bodyHasImages on a body's JSON text: true whenever bodyHasImages is. It can also be true without
 * an image part (a key ending in that text), which only costs a `markImagesSeen` that stamps
 * nothing; a string value's own quotes are escaped, so no message text can make it true.
 */
export function textHasImages(text) {
  return IMAGE_PART_TEXT.test(text);
}
