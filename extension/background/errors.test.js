// node --test extension/background/errors.test.js

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { errorInfo } from './errors.js';

function hostError(code, message = code) {
  return Object.assign(new Error(message), { code });
}

function llmError(kind, message, extra = {}) {
  return Object.assign(new Error(message), { name: 'LlmError', kind, partial: '', ...extra });
}

test('errorInfo codes', () => {
  assert.deepEqual(errorInfo(llmError('http', 'bad', { status: 400 })), { code: 'http_400', message: 'bad', kind: 'http', status: 400 });
  assert.equal(errorInfo(llmError('aborted', 'x'), { stopped: true }).code, 'stopped');
  assert.equal(errorInfo(hostError('busy')).kind, 'storage');
  // a provider redirect (issue 18): its own code, never rescued as an HTTP error
  assert.deepEqual(errorInfo(llmError('redirect', 'moved', { status: 307 })), { code: 'redirect', message: 'moved', kind: 'redirect', status: 307 });
});
