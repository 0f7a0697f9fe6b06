// A Web Worker for node --test suites, over node:worker_threads: `new ThreadWebWorker(moduleUrl)` runs that
// module file unchanged in a real thread, with the worker globals it uses (`WorkerGlobalScope`,
// `postMessage`, `onmessage`), and gives the page side `postMessage`, `onmessage`, `onerror` and
// `terminate()` like a module Worker. terminate() stops the thread whatever it is running (as a browser
// does), which is what lib/rich.js's time budget relies on. Not loaded by the extension.

import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

export class ThreadWebWorker {
  /** @param {string|URL} moduleUrl */
  constructor(moduleUrl) {
    this.onmessage = null;
    this.onerror = null;
    this.terminated = false;
    this.posted = [];
    this.thread = new Worker(new URL(import.meta.url), { workerData: { url: String(moduleUrl) } });
    this.thread.on('message', (data) => {
      if (!this.terminated) this.onmessage?.({ data });
    });
    this.thread.on('error', (e) => {
      if (!this.terminated) this.onerror?.({ message: e?.message || String(e) });
    });
  }
  postMessage(data) {
    this.posted.push(data);
    this.thread.postMessage(data);
  }
  terminate() {
    this.terminated = true;
    this.thread.terminate();
  }
}

// In the thread: the worker globals, then the module itself.
if (!isMainThread && workerData?.url) {
  globalThis.WorkerGlobalScope = Object; // `globalThis instanceof WorkerGlobalScope` holds
  globalThis.postMessage = (data) => parentPort.postMessage(data);
  parentPort.on('message', (data) => globalThis.onmessage?.({ data }));
  await import(workerData.url);
}
