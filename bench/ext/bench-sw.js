// The test build's service worker (bench/run.mjs points the manifest's `background.service_worker`
// here): the real worker first, then the benchmark cases on `self.__bench` (and the scale sweep's
// on `self.__scale`).

import '../background/sw.js';
import './cases.js';
import './scale.js';
