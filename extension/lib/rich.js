// Lazy loading of the code highlighter (lib/highlight.js → highlight.js) and the math renderer
// (lib/math.js → KaTeX) for renderMarkdown. Neither is on the panel's first paint: renderMarkdown says
// through `onNeed('code' | 'math')` that a reply has a closed code fence or a formula, the page calls
// `loadRich(kind)`, and renders that reply again when it resolves; `richHooks()` hands renderMarkdown
// whatever has loaded by then (`highlight`, `math`).

const loaded = { code: null, math: null };
const loading = { code: null, math: null };

const importers = {
  code: () => import('./highlight.js'),
  math: async () => {
    const m = await import('./math.js');
    await m.ensureStylesheet();
    return m;
  },
};

/** The hooks renderMarkdown takes, for whatever has loaded: `{highlight?, math?}`. */
export function richHooks() {
  const hooks = {};
  if (loaded.code) hooks.highlight = loaded.code.highlightCode;
  if (loaded.math) hooks.math = loaded.math.renderMath;
  return hooks;
}

/**
 * Load the highlighter (`'code'`) or the math renderer (`'math'`) once.
 * @param {'code'|'math'} kind
 * @returns {Promise<boolean>} whether it is loaded (false: it failed to load; replies stay plain)
 */
export function loadRich(kind) {
  if (!(kind in importers)) return Promise.resolve(false);
  if (loaded[kind]) return Promise.resolve(true);
  loading[kind] ??= importers[kind]().then(
    (m) => {
      loaded[kind] = m;
      return true;
    },
    (err) => {
      console.error(`loading the ${kind} renderer failed`, err);
      return false;
    },
  );
  return loading[kind];
}
