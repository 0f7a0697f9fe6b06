// The turn settings kept in the worker between sends (README "Worker chat handlers": how a send
// is made fast), and when they are forgotten.

import { changeAreas } from '../lib/protocol.js';

/** Settings a turn needs (explicit key list, storage-model §3). */
export const TURN_SETTING_KEYS = Object.freeze([
  'providers',
  'activeProvider',
  'activeModel',
  'systemPrompt',
  'autoSummarizeAttachments',
  'summarizeThresholdChars',
]);

/**
 * Writes that may change turn settings: a page's call of one, relayed by this worker, forgets them.
 * A restore puts back a whole database, its settings with it (issue 36).
 */
const SETTINGS_WRITES = new Set(['settings.set', 'settings.remove', 'storage.import', 'backups.restore']);

/**
 * The turn settings (TURN_SETTING_KEYS) as last read, so a send does not wait for a
 * `settings.get` round trip. Forgotten on every `changed` event naming settings (a restore names
 * every area: protocol.js `changeAreas`) and on every
 * connection state change of `events` (the NativePort: a new host process does not announce
 * commits made before it opened the database). A read that an event overtook is not kept. Without
 * `events` nothing is kept: every `get` reads.
 */
export class SettingsMemory {
  constructor(read, events) {
    this.read = read;
    this.value = null;
    this.generation = 0;
    this.keeps = !!events?.on;
    if (this.keeps) {
      events.on('changed', (change) => {
        if (changeAreas(change).settings) this.forget();
      });
      events.on('state', () => this.forget());
    }
  }

  forget() {
    this.generation++;
    this.value = null;
  }

  /**
   * A page's host call that this worker relays (`op`): a settings write forgets the settings when
   * it is sent and again when it is answered (`done`, a promise), so a send the page makes after
   * the write's reply reads them, whether or not the `changed` event has come yet.
   */
  relayed(op, done) {
    if (!SETTINGS_WRITES.has(op)) return;
    this.forget();
    Promise.resolve(done).then(
      () => this.forget(),
      () => this.forget(),
    );
  }

  async get() {
    if (this.value) return this.value;
    const generation = this.generation;
    const value = (await this.read()) ?? {};
    if (this.keeps && generation === this.generation) this.value = value;
    return value;
  }
}
