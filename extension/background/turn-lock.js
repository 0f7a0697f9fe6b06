// A small async mutex for the turn engine: routing-sensitive writes (append the user entry, the
// final append, load/new session) never interleave, so a finishing stream cannot land between a
// save and a switch.

export function createLock() {
  let tail = Promise.resolve();
  return {
    run(fn) {
      const p = tail.then(() => fn());
      tail = p.catch(() => {});
      return p;
    },
  };
}
