// A real Secret Service for a test: a private D-Bus session bus (no service directories, so nothing
// is started on demand) and Debian's gnome-keyring-daemon on it, its login keyring created and
// unlocked with a password on stdin; `secret-tool` (libsecret-tools) looks at what it holds.
// test.sh and run.sh install the packages; where they are missing, `missingKeyringTools()` names
// them so a test can skip with that message (or fail when KEEPSAKE_REQUIRE_KEYRING=1).

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { waitFor } from './harness.mjs';

const TOOLS = ['dbus-daemon', 'gnome-keyring-daemon', 'secret-tool'];

const onPath = (cmd) => (process.env.PATH || '').split(path.delimiter).some((d) => d && fs.existsSync(path.join(d, cmd)));

/** Why a keyring cannot be started here (a sentence), or null when it can. */
export function missingKeyringTools() {
  const missing = TOOLS.filter((c) => !onPath(c));
  if (!missing.length) return null;
  return `${missing.join(', ')} not found (apt-get install dbus gnome-keyring libsecret-tools; ./test.sh and tests/e2e/run.sh install them)`;
}

/** Start a bus and an unlocked keyring; `stop()` ends both and removes their folder. */
export async function startKeyring() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keepsake-e2e-keyring-'));
  for (const d of ['home/.local/share', 'home/.config', 'home/.cache']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  fs.mkdirSync(path.join(dir, 'run'), { mode: 0o700 });
  const bus = path.join(dir, 'run', 'bus');
  const config = path.join(dir, 'session.conf');
  fs.writeFileSync(
    config,
    `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=${bus}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
`,
  );
  const dbus = spawn('dbus-daemon', ['--nofork', '--print-address=1', `--config-file=${config}`], { stdio: ['ignore', 'pipe', 'ignore'] });
  let printed = '';
  dbus.stdout.on('data', (d) => (printed += d.toString()));
  const address = await waitFor(() => (printed.includes('\n') ? printed.split('\n')[0].trim() : null), {
    timeoutMs: 10_000,
    what: 'dbus-daemon --print-address',
  });
  const env = {
    HOME: path.join(dir, 'home'),
    XDG_DATA_HOME: path.join(dir, 'home/.local/share'),
    XDG_CONFIG_HOME: path.join(dir, 'home/.config'),
    XDG_CACHE_HOME: path.join(dir, 'home/.cache'),
    XDG_RUNTIME_DIR: path.join(dir, 'run'),
    DBUS_SESSION_BUS_ADDRESS: address,
  };
  const log = fs.openSync(path.join(dir, 'gnome-keyring.log'), 'w');
  const daemon = spawn('gnome-keyring-daemon', ['--foreground', '--unlock', '--components=secrets'], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'ignore', log],
  });
  // the login keyring's password: created and unlocked without a prompt
  daemon.stdin.end('keepsake-e2e-password');

  const tool = (args, input) =>
    spawnSync('secret-tool', args, { env: { ...process.env, ...env }, input, encoding: 'utf8', timeout: 20_000 });
  const kr = {
    dir,
    address,
    /** The environment a process needs to reach this keyring. */
    env,
    /** Every Keepsake item: [{account, label, secret}] (label and secret on stdout, attributes on stderr, same order). */
    items() {
      const r = tool(['search', '--all', '--unlock', 'service', 'dev.keepsake.host']);
      const users = r.stderr.split('\n').filter((l) => l.startsWith('attribute.username = ')).map((l) => l.slice(21));
      const blocks = [];
      for (const l of r.stdout.split('\n')) {
        if (l.startsWith('[')) blocks.push({});
        else if (l.startsWith('label = ') && blocks.length) blocks[blocks.length - 1].label = l.slice(8);
        else if (l.startsWith('secret = ') && blocks.length) blocks[blocks.length - 1].secret = l.slice(9);
      }
      if (users.length !== blocks.length) throw new Error(`secret-tool search: stdout ${r.stdout} stderr ${r.stderr}`);
      return users.map((account, i) => ({ account, ...blocks[i] }));
    },
    /** The secret of a Keepsake account, or null. */
    lookup(account) {
      const r = tool(['lookup', 'service', 'dev.keepsake.host', 'username', account]);
      return r.status === 0 && r.stdout ? r.stdout : null;
    },
    async stop() {
      for (const c of [daemon, dbus]) {
        if (c.exitCode === null && c.signalCode === null) {
          c.kill('SIGTERM');
          await new Promise((r) => c.once('exit', r));
        }
      }
      fs.closeSync(log);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  // ready once an item can be stored and read back
  try {
    await waitFor(
      () => {
        if (tool(['store', '--label=probe', 'service', 'keepsake-probe', 'username', 'probe'], 'ready').status !== 0) return false;
        return tool(['lookup', 'service', 'keepsake-probe', 'username', 'probe']).stdout === 'ready';
      },
      { timeoutMs: 20_000, intervalMs: 100, what: 'gnome-keyring-daemon serving the Secret Service' },
    );
  } catch (e) {
    const text = fs.readFileSync(path.join(dir, 'gnome-keyring.log'), 'utf8');
    await kr.stop();
    throw new Error(`${e.message}; its log:\n${text}`);
  }
  tool(['clear', 'service', 'keepsake-probe', 'username', 'probe']);
  return kr;
}
