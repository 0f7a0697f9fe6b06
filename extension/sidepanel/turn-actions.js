// What the transcript's turn buttons ask for (docs/keeps.md, PROTOCOL.md history.branch /
// switchVersion / markFailed): Regenerate a reply (`chat.regenerate {index}`: the worker keeps the
// current reply as a version once the new one is stored), Retry a message that was not answered
// (`chat.retry {index}`: the same stored entry is sent again, no copy), and "‹ ›" to show another
// version of a turn (`history.switchVersion`). No DOM: the panel passes what to call.
import { t } from '../lib/i18n.js';

/**
 * createTurnActions({workerCall, storage, beginStream(streamId), refreshHistory() → Promise,
 *                    clearNotices(), notice(text, opts), noticeFor(err, what), isStreaming() → bool})
 * → {regenerate(index, button), retry(index, button), switchVersion(fork, version, button)}
 */
export function createTurnActions({ workerCall, storage, beginStream, refreshHistory, clearNotices, notice, noticeFor, isStreaming }) {
  const disable = (button) => { if (button) button.disabled = true; };
  const enable = (button) => { if (button && button.isConnected !== false) button.disabled = false; };

  async function startTurn(kind, payload, what, button) {
    clearNotices();
    disable(button);
    try {
      const r = await workerCall(kind, payload);
      if (r?.streamId) beginStream(r.streamId);
      refreshHistory();
      return r;
    } catch (err) {
      noticeFor(err, what);
      refreshHistory();
      return null;
    } finally {
      enable(button);
    }
  }

  return {
    /** `index`: the assistant reply to regenerate. */
    regenerate: (index, button) => startTurn('chat.regenerate', { index }, t('turnActRegenerateFailed'), button),
    /** `index`: the user entry that was not answered. */
    retry: (index, button) => startTurn('chat.retry', { index }, t('turnActRetryFailed'), button),
    /** Show version `version` (1-based) of the turn `fork` names, then the history as it is now. */
    async switchVersion(fork, version, button) {
      if (isStreaming()) return false; // the reply being written goes after the version shown
      disable(button);
      try {
        await storage.history.switchVersion({ forkEntryId: fork.forkEntryId, version });
        return true;
      } catch (err) {
        if (err?.code === 'not_found') notice(t('turnActVersionGone'), { kind: 'info' });
        else noticeFor(err, t('turnActVersionFailed'));
        return false;
      } finally {
        await refreshHistory();
        enable(button);
      }
    },
  };
}
