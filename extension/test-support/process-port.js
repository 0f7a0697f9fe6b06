// A chrome.runtime.Port look-alike over a keepsake-host child process's stdio, for tests against
// the real binary: 4-byte little-endian length + UTF-8 JSON; a frame over 1,048,576 bytes closes
// the port with Chrome's message; an invalid JSON frame is dropped silently; process exit →
// `Native host has exited.`. Not loaded by the extension.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { fakeEvent } from './fakes.js';

/** The debug keepsake-host `cargo build` makes, and the `skip` reason of tests that need it. */
export const HOST_BIN = fileURLToPath(new URL('../../target/debug/keepsake-host', import.meta.url));
export const HOST_SKIP = existsSync(HOST_BIN) ? false : `keepsake-host is not built at ${HOST_BIN} (run cargo build)`;

const dirs = [];
const children = [];

/** A temp folder removed by `cleanUpHosts`. */
export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

/** `keepsake-host serve` on `db` with piped stdio, killed by `cleanUpHosts` if still running. */
export function spawnHost(db) {
  const child = spawn(HOST_BIN, ['serve'], { env: { ...process.env, KEEPSAKE_SECRET_STORE: 'off', KEEPSAKE_DB: db }, stdio: ['pipe', 'pipe', 'ignore'] });
  children.push(child);
  return child;
}

/** For `after()`: kill the hosts still running, remove the temp folders. */
export function cleanUpHosts() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}

export const MAX_FRAME = 1_048_576;
export const MAX_OUTBOUND = 64 * 1024 * 1024;
export const MSG_EXITED = 'Native host has exited.';
export const MSG_IO = 'Error when communicating with the native messaging host.';

/** A chrome.runtime.Port look-alike over a child process's stdio. */
export class ProcessPort {
  onMessage = fakeEvent();
  onDisconnect = fakeEvent();
  frames = []; // byte length of every frame received
  #buf = Buffer.alloc(0);
  #closed = false;

  constructor(child, env) {
    this.child = child;
    this.env = env;
    child.stdout.on('data', (d) => this.#onData(d));
    child.on('exit', () => this.#closeWith(MSG_EXITED));
    child.stdin.on('error', () => {}); // EPIPE after a kill
  }

  postMessage(msg) {
    if (this.#closed) throw new Error('Attempting to use a disconnected port object');
    const body = Buffer.from(JSON.stringify(msg), 'utf8');
    if (body.length > MAX_OUTBOUND) throw new Error('Message exceeded maximum allowed size of 64MiB.');
    const head = Buffer.alloc(4);
    head.writeUInt32LE(body.length, 0);
    this.child.stdin.write(Buffer.concat([head, body]));
  }

  disconnect() {
    if (this.#closed) return;
    this.#closed = true; // our own disconnect does not fire onDisconnect (as in Chrome)
    this.child.stdin.end();
  }

  #onData(d) {
    this.#buf = Buffer.concat([this.#buf, d]);
    while (!this.#closed && this.#buf.length >= 4) {
      const n = this.#buf.readUInt32LE(0);
      if (n > MAX_FRAME) return this.#closeWith(MSG_IO);
      if (this.#buf.length < 4 + n) return;
      const body = this.#buf.subarray(4, 4 + n);
      this.#buf = this.#buf.subarray(4 + n);
      this.frames.push(n);
      let msg;
      try {
        msg = JSON.parse(body.toString('utf8'));
      } catch {
        continue; // Chrome drops invalid frames silently
      }
      this.onMessage.fire(msg, this);
    }
  }

  #closeWith(message) {
    if (this.#closed) return;
    this.#closed = true;
    this.env.lastError = message;
    try {
      this.onDisconnect.fire(this);
    } finally {
      this.env.lastError = undefined;
    }
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}
