// The limits on highlighting and math in replies, in one place: the page's side (lib/rich.js: what is
// sent to the rich worker, its time budget, what one reply may hold) and the worker's side
// (lib/highlight.js, lib/math.js, lib/rich-worker.js: what each library is handed and what it may
// answer). The figures behind each value are in extension/README.md ("Highlighting and math"), measured
// by tests/e2e/freeze.e2e.mjs: what the page's thread does with an answer (building, cloning, checking
// and laying out its nodes) grows with the characters of code and the nodes of math in one reply.

/** A job (one code block or one formula) the worker has not answered within this long is cut: the worker
 *  is terminated (the only way to stop a runaway regex) and replaced, and that block or formula stays
 *  plain for good. highlight.js takes about 0.1 s for 100,000 characters of ordinary code. */
export const RICH_BUDGET_MS = 1500;

/** Longest code block sent to highlighting, in UTF-16 units; longer blocks stay plain. */
export const HIGHLIGHT_MAX = 100_000;
/** Characters of code one reply may send to highlighting, counted block by block in reply order; the blocks
 *  after that stay plain. */
export const HIGHLIGHT_REPLY_MAX = 100_000;
/** Code blocks one reply may send to highlighting; the ones after stay plain. */
export const HIGHLIGHT_REPLY_BLOCKS = 200;
/** Most nodes (spans and text) a highlighted block may have; more and it stays plain. */
export const HIGHLIGHT_NODES_MAX = 60_000;

/** Longest formula handed to KaTeX, in UTF-16 units; longer ones show as their source. */
export const MATH_MAX = 4000;
/** Deepest brace / \left nesting handed to KaTeX. */
export const MATH_DEPTH = 48;
/** Most nodes one formula's rendering may have (KaTeX's HTML, MathML and SVG); more: its source. */
export const MATH_NODES_MAX = 10_000;
/** Formulas one reply may render; the ones after show as their source. */
export const MATH_REPLY_MAX = 400;
/** Nodes all of one reply's formulas may have together; a formula that would pass it shows as its source. */
export const MATH_REPLY_NODES = 15_000;
