// The drawer's list and search right after a write, timed at the pipes (no browser): a release
// keepsake-host on a database of N text sessions of the scale sweep's generator, a node client
// speaking native messaging to it. Prints each call's milliseconds (the scale sweep's notes quote
// these figures). The database is made once per N under the temp dir and reused.
//
//   cargo build --release
//   KEEPSAKE_E2E_HOST_BIN=target/release/keepsake-host node bench/drawer-pipes.mjs 10000
//   (without KEEPSAKE_E2E_HOST_BIN: the debug build)

import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { EXT_ID, HOST_BIN } from '../tests/e2e/harness.mjs';
import { sessionsDocument } from './ext/gen.js';
import { scaleSession } from './ext/scale-gen.js';

const N = Number(process.argv[2] || 1000);
const dir = path.join(os.tmpdir(), `keepsake-drawer-pipes-${N}`);
const db = path.join(dir, 'keepsake.db');
if (!fs.existsSync(db)) {
  fs.mkdirSync(dir, { recursive: true });
  // a picture session's picture: one 1 × 1 PNG (text is what this measures)
  const png = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
  const sessions = Array.from({ length: N }, (_, i) => scaleSession(i, () => png));
  const doc = path.join(dir, 'sessions.json');
  fs.writeFileSync(doc, JSON.stringify({ ...sessionsDocument({ seed: 1, count: 0, chars: 10 }), sessions }));
  execFileSync(HOST_BIN, ['--db', db, 'import', doc], { stdio: ['ignore', 'ignore', 'inherit'] });
  fs.rmSync(doc);
}

const host = spawn(HOST_BIN, [`chrome-extension://${EXT_ID}/`], { env: { ...process.env, KEEPSAKE_DB: db } });
let buf = Buffer.alloc(0);
const waiting = new Map();
let lastId = 0;
host.stdout.on('data', (d) => {
  buf = Buffer.concat([buf, d]);
  while (buf.length >= 4) {
    const n = buf.readUInt32LE(0);
    if (buf.length < 4 + n) break;
    const msg = JSON.parse(buf.subarray(4, 4 + n).toString('utf8'));
    buf = buf.subarray(4 + n);
    if (msg.id && waiting.has(msg.id)) {
      waiting.get(msg.id)(msg);
      waiting.delete(msg.id);
    }
  }
});
function call(op, args) {
  const id = ++lastId;
  const body = Buffer.from(JSON.stringify({ id, op, args }));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(body.length);
  host.stdin.write(Buffer.concat([len, body]));
  return new Promise((resolve) => waiting.set(id, resolve));
}
const rows = [];
async function timed(label, op, args) {
  const t0 = performance.now();
  const r = await call(op, args);
  if (!r.ok) throw new Error(`${op}: ${JSON.stringify(r.error)}`);
  rows.push([label, (performance.now() - t0).toFixed(2)]);
}

await call('host.hello', {});
await timed('list, first after the start', 'sessions.list', { limit: 50 });
for (let i = 0; i < 3; i++) await timed('list, no write between', 'sessions.list', { limit: 50 });
for (let i = 0; i < 3; i++) {
  await call('history.append', { entry: { role: 'user', content: `hello ${i}` } });
  await timed('list, right after a write', 'sessions.list', { limit: 50 });
}
for (let i = 0; i < 3; i++) {
  await call('history.append', { entry: { role: 'user', content: `hey ${i}` } });
  await timed('search 鲸, right after a write', 'sessions.list', { query: '鲸', limit: 50 });
  await timed('search 鲸, no write between', 'sessions.list', { query: '鲸', limit: 50 });
}
host.stdin.end();
console.log(`${N} sessions (${db})`);
for (const [label, ms] of rows) console.log(`  ${label.padEnd(32)} ${ms} ms`);
