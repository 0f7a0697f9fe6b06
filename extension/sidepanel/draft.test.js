import test from 'node:test';
import assert from 'node:assert/strict';
import { draftToStore, draftFromStore, draftAfterSend, canSend } from './draft.js';

test('empty drafts remove the key', () => {
  assert.equal(draftToStore({ text: '  \n', images: [] }), null);
  assert.equal(draftToStore(null), null);
});

test('text is kept verbatim; images only while small', () => {
  assert.deepEqual(draftToStore({ text: ' hi ', images: [] }), { text: ' hi ', images: [], droppedImages: 0 });
  const big = 'data:image/png;base64,' + 'A'.repeat(100);
  const small = 'data:image/png;base64,AA==';
  assert.deepEqual(draftToStore({ text: '', images: [big, small] }, { maxImageChars: 50 }), { text: '', images: [small], droppedImages: 1 });
  assert.deepEqual(draftToStore({ text: '', images: [big] }, { maxImageChars: 50 }), null);
});

test('stored drafts are validated', () => {
  assert.deepEqual(draftFromStore(undefined), { text: '', images: [] });
  assert.deepEqual(draftFromStore({ text: 5, images: ['a', 3, ''] }), { text: '', images: ['a'] });
});

test('after a confirmed send only what was sent leaves the composer', () => {
  assert.deepEqual(draftAfterSend({ text: 'hi', images: ['a'] }, { text: 'hi', images: ['a'] }), { text: '', images: [] });
  assert.deepEqual(draftAfterSend({ text: 'hi', images: ['a'] }, { text: 'hi\nmore', images: ['a', 'b'] }), { text: 'more', images: ['b'] });
  assert.deepEqual(draftAfterSend({ text: 'hi', images: [] }, { text: 'other', images: [] }), { text: 'other', images: [] });
});

test('canSend needs text or an image', () => {
  assert.equal(canSend({ text: ' ', images: [] }), false);
  assert.equal(canSend({ text: 'x', images: [] }), true);
  assert.equal(canSend({ text: '', images: ['data:image/png;base64,AA=='] }), true);
});

import { refusalNote } from './draft.js';

test('refusal notes name the cap that was hit, as the host reported it', () => {
  const caps = { maxImages: 8, budget: 3 * 1024 * 1024 };
  assert.match(refusalNote(['count'], caps), /^Not added: .*at most 8 images/);
  assert.match(refusalNote(['size'], caps), /alone is larger than the 3 MB/);
  assert.match(refusalNote(['budget'], caps), /together/);
  assert.match(refusalNote(['shape'], caps), /not an image/);
  assert.match(refusalNote(['what'], caps), /over the per-message image limit/);
  assert.equal(refusalNote([], caps), '');
  assert.equal(refusalNote([null, 'count'], caps), refusalNote(['count'], caps), 'one refusal: no count in front');
  assert.match(refusalNote(['count', 'count', 'size'], caps), /^3 images were not added\. .*8 images.* 3 MB/);
  // other caps, other words: nothing is fixed in the panel
  assert.match(refusalNote(['count', 'budget'], { maxImages: 4, budget: 5 * 1024 * 1024 }), /at most 4 images.*exceed 5 MB/);
});
