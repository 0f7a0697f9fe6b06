// MV3 stops an idle service worker after 30 s, and an open native port alone keeps it only 60 s:
// while a stream or a summary runs, the worker calls an extension API every KEEPALIVE_MS.

/** The worker pings an extension API this often while a stream runs (MV3 idle shutdown is 30 s). */
export const KEEPALIVE_MS = 20_000;

/**
 * `start()` when a piece of work begins, `end()` when it settles: the pings run while any is in
 * flight. Without `chrome.runtime.getPlatformInfo` or timers nothing is scheduled.
 * @param {{chrome?: object, timers?: {setInterval, clearInterval}, ms?: number}} deps
 */
export function createKeepAlive({ chrome, timers, ms = KEEPALIVE_MS }) {
  let busyWork = 0;
  let keepAliveTimer = null;
  return {
    start() {
      busyWork++;
      if (keepAliveTimer == null && chrome?.runtime?.getPlatformInfo && timers?.setInterval) {
        keepAliveTimer = timers.setInterval(() => {
          try {
            Promise.resolve(chrome.runtime.getPlatformInfo()).catch(() => {});
          } catch {
            /* ignore */
          }
        }, ms);
      }
    },
    end() {
      busyWork = Math.max(0, busyWork - 1);
      if (busyWork === 0 && keepAliveTimer != null) {
        timers.clearInterval(keepAliveTimer);
        keepAliveTimer = null;
      }
    },
  };
}
