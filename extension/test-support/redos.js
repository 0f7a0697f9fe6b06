// ReDoS / super-linear work checks (issue 18) for lib/redos.test.js. Each CASE is a function of the
// extension that runs on text a model, a page or an imported file can shape; each SHAPE builds an
// adversarial input of about n characters (the classic ReDoS forms: long runs of one character,
// nested repetitions, unclosed delimiters, a near-match repeated). `measure` times a case on its
// shapes at 50 KB and 200 KB in a child process (so the test can stop a runaway call) and reports
// per-call CPU times (a busy machine stretches wall time, not CPU time); the test checks the growth
// ratio, about 4 for linear work and 16 or more for quadratic, rather than absolute times.
// `regexLiterals` lists the regular expressions of a source file, for the test that keeps every one
// of them audited. Not loaded by the extension.
//
//   node --expose-gc extension/test-support/redos.js --report [case …]   a table of the figures

import { fileURLToPath } from 'node:url';

/** Repeat `unit` to about `n` characters (whole units). */
export function fill(unit, n) {
  return unit.repeat(Math.max(1, Math.ceil(n / unit.length)));
}

/** Shapes every text function gets: name → (n) → string. */
export const SHAPES = {
  letters: (n) => fill('a', n),
  spacesThenX: (n) => fill(' ', n) + 'x',
  tabsSpacesNewlines: (n) => fill(' \t\n', n) + 'x',
  newlines: (n) => fill('\n', n) + 'x',
  nbsp: (n) => fill('\u00a0', n) + 'x',
  backticks: (n) => fill('`', n),
  backtickPairs: (n) => fill('`a', n),
  tildes: (n) => fill('~', n),
  stars: (n) => fill('*', n),
  starA: (n) => fill('*a', n),
  dollars: (n) => fill('$', n),
  dollarA: (n) => fill('$a ', n),
  dollarPairs: (n) => fill('$a$', n),
  currency: (n) => fill('$5 and ', n),
  dollarNewlines: (n) => fill('$a\n', n),
  mathParenOpen: (n) => fill('\\(a ', n),
  mathBracketOpen: (n) => fill('\\[a ', n),
  mathBlockOpen: (n) => fill('$$\na\n', n),
  mathBlockLines: (n) => fill('$$ a\n', n),
  bracketBlockOpen: (n) => fill('\\[\na\n', n),
  nestedStars: (n) => fill('*a', n / 2) + fill('a*', n / 2),
  underscores: (n) => fill('_a', n),
  mixedDelims: (n) => fill('*_~`', n),
  doubleTilde: (n) => fill('~~a', n),
  openBrackets: (n) => fill('[', n),
  closeBrackets: (n) => fill(']', n),
  bracketParen: (n) => fill('[](', n),
  linkTitleUnclosed: (n) => fill('[a](b (', n),
  linkTitleQuote: (n) => fill('[a](b "', n),
  linkAngle: (n) => fill('[a](<', n),
  nestedLinks: (n) => fill('[', n / 2) + fill('](x)', n / 2),
  imageOpen: (n) => fill('![', n),
  autolinkUnclosed: (n) => '<a:' + fill('x', n),
  autolinkMany: (n) => fill('<a:b', n),
  emailUnclosed: (n) => '<' + fill('a.', n) + '@',
  emailDomain: (n) => '<a@' + fill('a.', n) + '!',
  lessThan: (n) => fill('<', n),
  ampersands: (n) => fill('&', n),
  entityNear: (n) => fill('&#x1', n),
  entityNamed: (n) => fill('&amp', n),
  backslashes: (n) => fill('\\', n),
  escapes: (n) => fill('\\*', n),
  bareUrl: (n) => 'http://' + fill('a', n),
  urlParens: (n) => 'https://x.y/' + fill('(', n / 2) + fill(')', n / 2),
  urlMany: (n) => fill('http://', n),
  urlTrailingPunct: (n) => 'https://x.y/' + fill('.,:;!?', n),
  httpNoScheme: (n) => fill('http', n),
  pillNear: (n) => fill('[00:0', n),
  pillRangeNear: (n) => fill('[1:00-1:0', n),
  pillsValid: (n) => fill('[00:05] ', n),
  bracketsLong: (n) => '[' + fill('1', n) + ']',
  choicesFences: (n) => fill('```choices\n', n / 3) + '\n```' + fill(' ', (2 * n) / 3) + 'x',
  choicesTildes: (n) => fill('~~~choices\n', n / 3) + '\n~~~' + fill('\t', (2 * n) / 3) + 'x',
  choicesTags: (n) => fill('<choices>', n / 3) + fill(' ', (2 * n) / 3) + '</choices',
  choicesAlternating: (n) => fill('~~~choices\nx\n~~~\n```choices\ny\n```\n<choices>z</choices>\n', n),
  fencesManyLengths: (n) => fill('````choices\n```\n', n) + '```',
  headings: (n) => fill('#', n),
  headingLines: (n) => fill('# a #\n', n),
  quotes: (n) => fill('>', n),
  quoteLines: (n) => fill('> a\n', n),
  quoteNested: (n) => fill('> > > > > > > > > > > > > > > > > > > a\n', n),
  listItems: (n) => fill('- a\n', n),
  listNested: (n) => fill('- a\n  - b\n    - c\n      - d\n        - e\n', n),
  listDeep: (n) => fill(Array.from({ length: 20 }, (_, i) => ' '.repeat(2 * i) + '- x\n').join(''), n),
  orderedItems: (n) => fill('1. a\n', n),
  listMarkersNoSpace: (n) => fill('-', n),
  tableRows: (n) => '| a | b |\n|---|---|\n' + fill('| x | y |\n', n),
  tablePipes: (n) => 'a|b\n-|-\n' + fill('|', n),
  delimRowLong: (n) => 'a|b\n' + fill('-', n) + '|-\n',
  hrLines: (n) => fill('---\n', n),
  fenceUnclosed: (n) => '```\n' + fill('a\n', n),
  fenceManyOpen: (n) => fill('```a\n', n),
  tildeFenceLines: (n) => fill('~~~\n', n),
  crlf: (n) => fill('\r\n', n) + 'x',
  cr: (n) => fill('\r', n) + 'x',
  colons: (n) => fill(':', n),
  dashesSpaces: (n) => 'a' + fill('- .', n) + 'b',
  dots: (n) => 'a' + fill('.', n) + 'b',
  slashes: (n) => fill('/', n) + 'x',
  quotesDouble: (n) => fill('"', n),
  typeKey: (n) => fill('"type"' + ' '.repeat(40), n),
  typeKeyColon: (n) => fill('"type": ', n),
  dataUrlParams: (n) => 'data:image/png' + fill(';a', n),
  dataUrlBase64Near: (n) => 'data:image/png' + fill(';base64', n),
  schemeLong: (n) => fill('a', n) + '://',
  userinfoLong: (n) => 'https://' + fill('a', n),
  userinfoAt: (n) => 'https://' + fill('a:b', n) + '/@',
  digits: (n) => fill('1', n),
  hexish: (n) => fill('ab', n) + 'g',
  sseLines: (n) => fill('data: x\n', n),
  sseNoNewline: (n) => 'data: ' + fill('x', n),
  sseBlankEvents: (n) => fill('data: {}\n\n', n),
  sseColons: (n) => fill(':', n) + '\n',
  cjk: (n) => fill('粗体：**', n),
  surrogates: (n) => fill('😀*', n),
  mixedRandom: (n) => {
    // a seeded mix of every special character (mulberry32, fixed seed)
    let s = 0x9e3779b9;
    const rnd = () => {
      s = (s + 0x6d2b79f5) >>> 0;
      let t = s;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const alphabet = ['`', '~', '*', '_', '[', ']', '(', ')', '<', '>', '&', '\\', '!', '|', '#', '-', ':', '\n', ' ', 'a', '"', 'http://', '```', 'choices', '</choices>', '[00:0', ';', '@', '.'];
    let out = '';
    while (out.length < n) out += alphabet[Math.floor(rnd() * alphabet.length)];
    return out;
  },
};

/** A document whose nodes only hold their children: renderMarkdown's DOM work at O(1) per call. */
export function nullDocument() {
  const node = (name) => ({
    nodeName: name,
    childNodes: [],
    attributes: {},
    appendChild(c) {
      this.childNodes.push(c);
      return c;
    },
    setAttribute(k, v) {
      this.attributes[k] = v;
    },
  });
  return {
    createElement: (tag) => node(tag),
    createTextNode: (text) => ({ nodeName: '#text', text }),
    createDocumentFragment: () => node('#fragment'),
  };
}

const WS = ['letters', 'spacesThenX', 'tabsSpacesNewlines', 'newlines', 'nbsp', 'crlf', 'cr', 'mixedRandom'];
const INLINE = [
  'backticks', 'backtickPairs', 'tildes', 'stars', 'starA', 'nestedStars', 'underscores', 'mixedDelims', 'doubleTilde',
  'openBrackets', 'closeBrackets', 'bracketParen', 'linkTitleUnclosed', 'linkTitleQuote', 'linkAngle', 'nestedLinks',
  'imageOpen', 'autolinkUnclosed', 'autolinkMany', 'emailUnclosed', 'emailDomain', 'lessThan', 'ampersands',
  'entityNear', 'entityNamed', 'backslashes', 'escapes', 'cjk', 'surrogates',
  'dollars', 'dollarA', 'dollarPairs', 'currency', 'dollarNewlines', 'mathParenOpen', 'mathBracketOpen',
];
const URLS = ['bareUrl', 'urlParens', 'urlMany', 'urlTrailingPunct', 'httpNoScheme', 'schemeLong', 'userinfoLong', 'userinfoAt', 'slashes', 'colons', 'dots'];
const PILLS = ['pillNear', 'pillRangeNear', 'pillsValid', 'bracketsLong', 'openBrackets', 'closeBrackets', 'bracketParen', 'digits', 'colons'];
const CHOICES = ['choicesFences', 'choicesTildes', 'choicesTags', 'choicesAlternating', 'fencesManyLengths', 'backticks', 'tildes', 'lessThan'];
const BLOCKS = [
  'headings', 'headingLines', 'quotes', 'quoteLines', 'quoteNested', 'listItems', 'listNested', 'listDeep', 'orderedItems',
  'listMarkersNoSpace', 'tableRows', 'tablePipes', 'delimRowLong', 'hrLines', 'fenceUnclosed', 'fenceManyOpen', 'tildeFenceLines',
  'mathBlockOpen', 'mathBlockLines', 'bracketBlockOpen', 'dollarA', 'currency',
];
const SHORT = [...WS, 'digits', 'hexish', 'colons', 'slashes', 'dots', 'dashesSpaces', 'quotesDouble'];
const DATA_URLS = ['dataUrlParams', 'dataUrlBase64Near', 'colons', 'slashes'];
const SSE = ['sseLines', 'sseNoNewline', 'sseBlankEvents', 'sseColons'];
const uniq = (...groups) => [...new Set(groups.flat())];

/**
 * The functions under test. `load()` → the function to time (string in, anything out); `shapes`: the
 * shape names it gets; `where`: what it covers (for messages); `sizes`: [small, large] characters
 * when not [SMALL, LARGE].
 */
export const CASES = [
  {
    name: 'choices.stripChoiceBlocks',
    shapes: uniq(WS, CHOICES),
    where: 'background/choices.js: final replies (choice blocks)',
    load: async () => (await import('../background/choices.js')).stripChoiceBlocks,
  },
  {
    name: 'image-tokens.parseDataUrl',
    shapes: uniq(SHORT, DATA_URLS),
    where: 'background/image-tokens.js: pasted / page image data URLs',
    load: async () => (await import('../background/image-tokens.js')).parseDataUrl,
  },
  {
    name: 'image-tokens.textHasImages',
    shapes: uniq(SHORT, ['typeKey', 'typeKeyColon']),
    where: 'background/image-tokens.js IMAGE_PART_TEXT: request body text (page text, replies)',
    load: async () => (await import('../background/image-tokens.js')).textHasImages,
  },
  {
    name: 'image-tokens.collectTokens',
    shapes: SHORT,
    where: 'background/image-tokens.js TOKEN_RE (isImageToken): strings of request bodies',
    load: async () => (await import('../background/image-tokens.js')).collectTokens,
  },
  {
    name: 'page-attach.extractReadablePage',
    shapes: uniq(WS, ['dashesSpaces', 'hrLines', 'quoteLines']),
    where: 'background/page-attach.js extractReadablePage clean(): page text (runs in the page)',
    load: async () => {
      const { extractReadablePage } = await import('../background/page-attach.js');
      return (text) => {
        const saved = { document: globalThis.document, location: globalThis.location };
        globalThis.document = { title: 't', body: { innerText: text }, querySelector: () => null, querySelectorAll: () => [] };
        globalThis.location = { href: 'https://example.test/' };
        try {
          return extractReadablePage();
        } finally {
          globalThis.document = saved.document;
          globalThis.location = saved.location;
        }
      };
    },
  },
  {
    name: 'markdown.renderMarkdown',
    shapes: uniq(WS, BLOCKS, ['choicesFences', 'choicesAlternating', 'starA', 'nestedLinks', 'linkTitleUnclosed', 'pillsValid', 'bareUrl', 'sseBlankEvents']),
    sizes: [25_000, 100_000], // 1–3 µs a character: 100 KB keeps the run short
    where: 'lib/markdown.js: every block and inline scanner, ENTITY_RE, AUTOLINK_*_RE, the table and code-span regexes',
    load: async () => {
      const { renderMarkdown } = await import('../lib/markdown.js');
      const doc = nullDocument();
      return (text) => renderMarkdown(text, doc, { pills: true, throwOnError: true });
    },
  },
  {
    name: 'markdown.parseInline',
    shapes: uniq(WS, INLINE, PILLS, ['bareUrl', 'urlParens']),
    sizes: [25_000, 100_000],
    where: 'lib/markdown.js: inline scanner on one long paragraph',
    load: async () => (await import('../lib/markdown.js')).parseInline,
  },
  {
    name: 'markdown.linkify',
    shapes: uniq(WS, URLS, ['cjk', 'surrogates', 'lessThan', 'quotesDouble']),
    where: 'lib/markdown.js: bare URLs',
    load: async () => (await import('../lib/markdown.js')).linkify,
  },
  {
    name: 'markdown.safeHref',
    shapes: uniq(SHORT, URLS, ['ampersands', 'entityNear', 'entityNamed', 'backslashes', 'escapes']),
    where: 'lib/markdown.js: link destinations (capped at 4096 chars after decoding)',
    load: async () => (await import('../lib/markdown.js')).safeHref,
  },
  {
    name: 'links.safeHref',
    shapes: uniq(SHORT, URLS),
    where: 'lib/links.js: every link the extension draws (chips, picture links, Markdown; capped at 8192 chars)',
    load: async () => (await import('../lib/links.js')).safeHref,
  },
  {
    name: 'pills.splitPills',
    shapes: uniq(WS, PILLS),
    where: 'lib/pills.js: [mm:ss] stamps in replies',
    load: async () => (await import('../lib/pills.js')).splitPills,
  },
  {
    name: 'pills.parseTimestamp',
    shapes: uniq(SHORT, PILLS),
    where: 'lib/pills.js: one stamp (the /^[0-9]+$/ test)',
    load: async () => (await import('../lib/pills.js')).parseTimestamp,
  },
  {
    name: 'llm.createSseParser',
    shapes: uniq(WS, SSE),
    where: 'lib/llm.js: the provider event stream, pushed in 1 KB pieces',
    load: async () => {
      const { createSseParser } = await import('../lib/llm.js');
      return (text) => {
        let events = 0;
        const p = createSseParser(() => events++);
        for (let i = 0; i < text.length; i += 1024) p.push(text.slice(i, i + 1024));
        p.end();
        return events;
      };
    },
  },
  {
    name: 'llm.extractError',
    shapes: uniq(SHORT, ['openBrackets', 'quotesDouble', 'nestedLinks', 'lessThan']),
    where: 'lib/llm.js: provider error bodies',
    load: async () => {
      const { extractError } = await import('../lib/llm.js');
      return (text) => extractError(500, text);
    },
  },
  {
    name: 'caps.imageShapeOk',
    shapes: uniq(SHORT, URLS, DATA_URLS),
    where: 'lib/caps.js SHAPE_RE (and lib/entries.js IMAGE_REF_RE): image URLs',
    load: async () => (await import('../lib/caps.js')).imageShapeOk,
  },
  {
    name: 'entries.describeAttach',
    shapes: uniq(WS, ['dashesSpaces', 'hrLines', 'colons']),
    where: 'sidepanel/entries.js: attach text (page title, URL, mode line)',
    load: async () => {
      const { describeAttach } = await import('../sidepanel/entries.js');
      return (text) => describeAttach({ role: 'user', content: `[Page context attached by Keepsake]\nTitle: ${text}\nURL: ${text}\nMode: ${text} (fallback to full)\n---\n${text}` });
    },
  },
  {
    name: 'entries.redactUrl',
    shapes: uniq(SHORT, URLS),
    where: 'lib/entries.js: page URLs (attach) and tab URLs of screenshots',
    load: async () => (await import('../lib/entries.js')).redactUrl,
  },
  {
    name: 'entries.isImageRef',
    shapes: SHORT,
    where: 'lib/entries.js IMAGE_REF_RE: image part URLs, strings of import documents',
    load: async () => {
      const { isImageRef } = await import('../lib/entries.js');
      return (text) => isImageRef('keepsake-image:sha256:' + text);
    },
  },
  {
    name: 'images.splitDataUrl',
    shapes: uniq(SHORT, DATA_URLS),
    where: 'sidepanel/images.js: data URLs shown in the panel',
    load: async () => (await import('../sidepanel/images.js')).splitDataUrl,
  },
  {
    name: 'snippet.highlightSegments',
    shapes: uniq(WS, ['cjk', 'surrogates']),
    where: 'sidepanel/snippet.js: search snippets (chat text) and the query',
    load: async () => {
      const { highlightSegments } = await import('../sidepanel/snippet.js');
      return (text) => highlightSegments(text, 'a');
    },
  },
  {
    name: 'snippet.normalizeQuery',
    shapes: WS,
    where: 'sidepanel/snippet.js: the search query',
    load: async () => (await import('../sidepanel/snippet.js')).normalizeQuery,
  },
  {
    name: 'export-name.slugify',
    shapes: uniq(SHORT, ['cjk', 'surrogates']),
    where: 'sidepanel/export-name.js: chat names (imported files, first messages)',
    load: async () => (await import('../sidepanel/export-name.js')).slugify,
  },
  {
    name: 'export-name.safeFilename',
    shapes: uniq(SHORT, ['choicesFences', 'lessThan', 'quotesDouble']),
    where: 'sidepanel/export-name.js: export file names',
    load: async () => {
      const { safeFilename } = await import('../sidepanel/export-name.js');
      return (text) => safeFilename(text, 'fallback');
    },
  },
  {
    name: 'draft.draftAfterSend',
    shapes: WS,
    where: 'sidepanel/draft.js: the composer text',
    load: async () => {
      const { draftAfterSend } = await import('../sidepanel/draft.js');
      return (text) => draftAfterSend({ text: 'a' }, { text: 'a' + text });
    },
  },
  {
    name: 'providers.normalizeCard',
    shapes: uniq(SHORT, URLS),
    where: 'options/providers.js: provider cards (typed or imported settings)',
    load: async () => {
      const { normalizeCard } = await import('../options/providers.js');
      return (text) => normalizeCard({ id: 'x', name: text, kind: 'chat', baseUrl: text, apiKey: text, model: text });
    },
  },
  {
    name: 'providers.insecureBaseUrlWarning',
    shapes: uniq(SHORT, URLS),
    where: 'options/providers.js: base URLs (typed or imported settings)',
    load: async () => {
      const { insecureBaseUrlWarning } = await import('../options/providers.js');
      return (text) => insecureBaseUrlWarning('http://127.' + text);
    },
  },
  {
    name: 'providers.parseWholeNumber',
    shapes: SHORT,
    where: 'options/providers.js: number fields',
    load: async () => (await import('../options/providers.js')).parseWholeNumber,
  },
  {
    name: 'site-cache.tabIdOfKey',
    shapes: SHORT,
    where: 'background/site-cache.js: storage keys',
    load: async () => {
      const { tabIdOfKey } = await import('../background/site-cache.js');
      return (text) => tabIdOfKey('site:' + text);
    },
  },
];

/** CPU milliseconds of this process so far (a loaded machine stretches wall time, not CPU time). */
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const gc = typeof globalThis.gc === 'function' ? globalThis.gc : () => {};

/** Per-call CPU milliseconds of fn(input), over calls adding up to at least `minMs` (0: one call). */
export function timeCall(fn, input, { minMs = 5, collect = true } = {}) {
  if (collect) gc(); // the previous measurement's garbage is not this one's time
  let calls = 0;
  const t0 = cpuMs();
  let t = t0;
  do {
    fn(input);
    calls++;
    t = cpuMs();
  } while (t - t0 < minMs);
  return (t - t0) / calls;
}

/** The small and the large input (characters): the large one is 4× the small one. */
export const SMALL = 50_000;
export const LARGE = 200_000;
/**
 * A shape whose large input takes less CPU than this is fast enough whatever its growth (20× under
 * 100 ms per 100 KB). Below it, growth ratios measure caches more than algorithms: 50 KB fits in
 * the CPU cache and the young generation, 200 KB does not.
 */
export const FAST_MS = 10;

/**
 * Time one case on each of its shapes; `post` gets {type: 'start', shape} before each shape and
 * {type: 'result', shape, lengths: [small, large], ms: [small, large], ratios} after it. A shape
 * whose large input runs in under FAST_MS once warm is not timed further (`ratios` is empty).
 * Otherwise both sizes are timed `repeats` times, interleaved, and the least time of each size gives
 * the ratio; a ratio over `limit` is measured again, up to `attempts` times in all (a busy machine
 * can stretch one measurement, not all of them).
 */
export async function measure(caseName, { shapes, post, repeats = 2, attempts = 3, limit = 10 }) {
  const c = CASES.find((x) => x.name === caseName);
  if (!c) throw new Error(`no case ${caseName}`);
  const fn = await c.load();
  fn('warm up ' + SHAPES.mixedRandom(2000)); // compile the hot paths first
  for (const shape of shapes ?? c.shapes) {
    post({ type: 'start', shape });
    const large = SHAPES[shape](c.sizes?.[1] ?? LARGE);
    fn(large); // warm up on this shape (and flatten the string)
    const once = timeCall(fn, large, { minMs: 0, collect: false });
    if (once < FAST_MS) {
      post({ type: 'result', shape, lengths: [0, large.length], ms: [0, once], ratios: [] });
      continue;
    }
    const small = SHAPES[shape](c.sizes?.[0] ?? SMALL);
    const ratios = [];
    let ms = null;
    for (let a = 0; a < attempts; a++) {
      let tSmall = Infinity;
      let tLarge = a === 0 ? once : Infinity;
      for (let r = 0; r < repeats; r++) {
        tSmall = Math.min(tSmall, timeCall(fn, small));
        tLarge = Math.min(tLarge, timeCall(fn, large));
      }
      ms = [tSmall, tLarge];
      ratios.push(tLarge / tSmall);
      if (tLarge / tSmall <= limit) break;
    }
    post({ type: 'result', shape, lengths: [small.length, large.length], ms, ratios });
  }
  post({ type: 'done' });
}

/** The node arguments of a measuring child process (`node <args> <case name> [shape …]`). */
export const CHILD_ARGS = ['--expose-gc', '--single-threaded-gc', '--max-semi-space-size=64', fileURLToPath(import.meta.url)];

/**
 * The regular expression literals (and `RegExp` mentions) of a JavaScript source: [{line, literal}].
 * A small lexer: comments, strings and template literals are skipped, and a `/` starts a regex
 * where an expression may start (after an operator, `(`, `,`, a keyword such as `return`…), not
 * after a name, a number, `)` or `]`. Enough for this code base, not for every JavaScript program.
 */
export function regexLiterals(src) {
  const out = [];
  const n = src.length;
  let i = 0;
  let prev = ''; // the last token: 'name' | 'value' | 'regex' | the punctuator | '' at the start
  let word = '';
  const templates = []; // brace depth at each open `${`
  let depth = 0;
  const EXPR_KEYWORDS = new Set(['return', 'typeof', 'case', 'do', 'else', 'in', 'of', 'new', 'delete', 'void', 'throw', 'instanceof', 'yield', 'await']);
  const regexMayStart = () => {
    if (prev === 'name') return EXPR_KEYWORDS.has(word);
    if (prev === 'value' || prev === 'regex') return false;
    return prev !== ')' && prev !== ']' && prev !== '}';
  };
  const lineOf = (pos) => {
    let l = 1;
    for (let k = src.indexOf('\n'); k !== -1 && k < pos; k = src.indexOf('\n', k + 1)) l++;
    return l;
  };
  const template = () => {
    while (i < n) {
      const c = src[i];
      if (c === '\\') i += 2;
      else if (c === '`') {
        i++;
        prev = 'value';
        return;
      } else if (c === '$' && src[i + 1] === '{') {
        i += 2;
        templates.push(depth++);
        prev = '{';
        return;
      } else i++;
    }
  };
  while (i < n) {
    const c = src[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') i++;
    else if (c === '/' && src[i + 1] === '/') {
      while (i < n && src[i] !== '\n') i++;
    } else if (c === '/' && src[i + 1] === '*') {
      const e = src.indexOf('*/', i + 2);
      i = e === -1 ? n : e + 2;
    } else if (c === '"' || c === "'") {
      i++;
      while (i < n && src[i] !== c) i += src[i] === '\\' ? 2 : 1;
      i++;
      prev = 'value';
    } else if (c === '`') {
      i++;
      template();
    } else if (c === '}' && templates.length > 0 && templates[templates.length - 1] === depth - 1) {
      templates.pop();
      depth--;
      i++;
      template();
    } else if (c === '/' && regexMayStart()) {
      const start = i++;
      let inClass = false;
      while (i < n && (inClass || src[i] !== '/')) {
        if (src[i] === '\n') throw new Error(`regexLiterals: unterminated regex on line ${lineOf(start)}`);
        if (src[i] === '\\') i++;
        else if (src[i] === '[') inClass = true;
        else if (src[i] === ']') inClass = false;
        i++;
      }
      i++;
      while (i < n && /[a-z]/.test(src[i])) i++;
      out.push({ line: lineOf(start), literal: src.slice(start, i) });
      prev = 'regex';
    } else if (/[A-Za-z_$\u0080-\uffff]/.test(c)) {
      let j = i + 1;
      while (j < n && /[A-Za-z0-9_$\u0080-\uffff]/.test(src[j])) j++;
      word = src.slice(i, j);
      if (word === 'RegExp') out.push({ line: lineOf(i), literal: 'RegExp' });
      prev = 'name';
      i = j;
    } else if (/[0-9]/.test(c)) {
      while (i < n && /[0-9A-Za-z_.]/.test(src[i])) i++;
      prev = 'value';
    } else {
      if (c === '{') depth++;
      else if (c === '}') depth--;
      prev = c;
      i++;
    }
  }
  return out;
}

// Child entry: one JSON line per message on stdout; `--report`: a table of every case's figures.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args[0] === '--report') {
    const names = args.length > 1 ? args.slice(1) : CASES.map((c) => c.name);
    console.log('case | shapes | slowest shape | 50 KB ms | 200 KB ms | ratio | µs per KB at 200 KB');
    for (const name of names) {
      const rows = [];
      await measure(name, { post: (m) => m.type === 'result' && rows.push(m) });
      rows.sort((a, b) => b.ms[1] - a.ms[1]);
      const w = rows[0];
      const ratio = w.ratios.length ? w.ratios[w.ratios.length - 1].toFixed(1) : '(fast)';
      const kb = w.lengths[1] / 1000;
      console.log(`${name} | ${rows.length} | ${w.shape} | ${w.ms[0].toFixed(2)} | ${w.ms[1].toFixed(2)} | ${ratio} | ${((w.ms[1] * 1000) / kb).toFixed(1)}`);
    }
  } else {
    const [caseName, ...shapes] = args;
    const post = (m) => process.stdout.write(JSON.stringify(m) + '\n');
    measure(caseName, { shapes: shapes.length ? shapes : undefined, post }).catch((e) => {
      post({ type: 'error', message: String(e?.stack || e) });
      process.exitCode = 1;
    });
  }
}
