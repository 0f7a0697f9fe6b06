// Deterministic benchmark inputs shared by the driver (node) and the bench service worker: seeded
// text in mixed English and Chinese, chat histories, saved sessions and the search queries. Pure
// JavaScript (no node or browser APIs), so both sides build byte-identical inputs from a seed.

/**
 * A seeded PRNG (mulberry32): the same seed gives the same sequence in every engine.
 * @param {number} seed
 * @returns {() => number} uniform floats in [0, 1)
 */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const EN = (
  'the of and to in is it that for on with as was at by this be from or an are not have which but one all ' +
  'were when we there can more if what about out up into so time only new some could them these other than ' +
  'then now its also two first after way over most did many where before must through back years much ' +
  'request response session history image screenshot browser worker storage cache index query result ' +
  'network latency budget thumbnail message reply stream provider model context window token render panel ' +
  'drawer search snippet export import backup database schema migration transaction journal checkpoint page ' +
  'buffer frame chunk channel native host extension manifest permission origin sandbox profile process ' +
  'memory thread queue timer event listener promise module function argument value object array string ' +
  'number boolean error warning retry timeout offline online sync lighthouse harbour river mountain forest ' +
  'garden kitchen coffee paper ledger lantern compass orbit signal'
).split(' ');

const ZH = (
  '我们 数据 缓存 会话 历史 图片 截图 浏览器 存储 索引 查询 结果 网络 延迟 预算 缩略图 消息 回复 模型 上下文 ' +
  '窗口 渲染 面板 搜索 片段 导出 导入 备份 数据库 迁移 事务 日志 页面 通道 进程 内存 线程 队列 事件 错误 ' +
  '重试 超时 同步 灯塔 港口 河流 山脉 森林 花园 厨房 咖啡 纸张 账本 灯笼 指南针 轨道 信号 时间 问题 方法 ' +
  '系统 用户 文件 工作 需要 可以 已经 因为 所以 但是 如果 这个 那个 一些 没有 什么 现在 今天 明天 开始 完成'
).split(' ');

/** Search queries of 1, 2 and 5 characters, and the share of sessions each one occurs in. */
export const SEARCH_QUERIES = Object.freeze([
  { label: '1 char', q: '鲸', share: 0.25 },
  { label: '2 chars', q: '琥珀', share: 0.1 },
  { label: '5 chars', q: 'quill', share: 0.05 },
]);

function pick(rand, list) {
  return list[Math.floor(rand() * list.length)];
}

function englishSentence(rand) {
  const n = 8 + Math.floor(rand() * 9);
  const words = [];
  for (let i = 0; i < n; i++) words.push(pick(rand, EN));
  const s = words.join(' ');
  return `${s[0].toUpperCase()}${s.slice(1)}.`;
}

function chineseSentence(rand) {
  const n = 6 + Math.floor(rand() * 10);
  let s = '';
  for (let i = 0; i < n; i++) s += pick(rand, ZH);
  return `${s}。`;
}

/**
 * About `chars` UTF-16 units of prose: English and Chinese sentences (`zhShare` of them Chinese),
 * a paragraph break every few sentences. Cut to exactly `chars`.
 * @param {() => number} rand
 * @param {number} chars
 * @param {{zhShare?: number}} [o]
 * @returns {string}
 */
export function mixedText(rand, chars, { zhShare = 0.4 } = {}) {
  const parts = [];
  let len = 0;
  let inPara = 0;
  while (len < chars) {
    const s = rand() < zhShare ? chineseSentence(rand) : englishSentence(rand);
    const sep = inPara === 0 ? '' : inPara > 3 && rand() < 0.4 ? '\n\n' : ' ';
    if (sep === '\n\n') inPara = 0;
    parts.push(sep, s);
    len += sep.length + s.length;
    inPara++;
  }
  return parts.join('').slice(0, chars);
}

/**
 * A chat history: `count` entries alternating user / assistant (user first), each about `chars`
 * units of text. `images` maps an entry index (a user entry) to the image URLs it carries; such an
 * entry has array content (a text part, then the image parts), optionally stamped `imagesSeen`.
 * @param {{seed: number, count: number, chars: number, images?: Map<number, string[]>, seen?: boolean}} o
 * @returns {object[]}
 */
export function chatHistory({ seed, count, chars, images = new Map(), seen = false }) {
  const rand = rng(seed);
  const out = [];
  for (let i = 0; i < count; i++) {
    const role = i % 2 === 0 ? 'user' : 'assistant';
    const text = mixedText(rand, chars);
    const urls = images.get(i);
    if (urls && role !== 'user') throw new Error(`entry ${i} is an assistant entry; images go in user entries`);
    if (urls) {
      const entry = {
        role,
        content: [{ type: 'text', text }, ...urls.map((url) => ({ type: 'image_url', image_url: { url } }))],
      };
      if (seen) entry.imagesSeen = true;
      out.push(entry);
    } else {
      out.push({ role, content: text });
    }
  }
  return out;
}

/**
 * Indexes of the user entries that carry the `n` screenshots of a `count`-entry history: spread
 * over the newer half (the oldest entries, which an append trims, carry none).
 * @param {number} count
 * @param {number} n
 * @returns {number[]}
 */
export function imageSlots(count, n) {
  if (n === 0) return [];
  const first = Math.floor(count / 4);
  const out = [];
  for (let k = 0; k < n; k++) {
    let i = first + Math.floor(((count - 1 - first) * (k + 1)) / n);
    if (i % 2 === 1) i--;
    out.push(i);
  }
  return [...new Set(out)];
}

/**
 * One saved session of about `chars` units of text in entries of about `entryChars`, with the
 * search markers of SEARCH_QUERIES placed at seeded positions in the sessions they belong to.
 * @param {{seed: number, index: number, chars: number, entryChars?: number}} o
 * @returns {{id: string, name: string, createdAt: number, pinned: boolean, entries: object[]}}
 */
export function savedSession({ seed, index, chars, entryChars = 5000 }) {
  const rand = rng(seed * 100_003 + index);
  const n = Math.max(1, Math.round(chars / entryChars));
  const entries = [];
  for (let i = 0; i < n; i++) {
    entries.push({ role: i % 2 === 0 ? 'user' : 'assistant', content: mixedText(rand, entryChars) });
  }
  for (const { q, share } of SEARCH_QUERIES) {
    if (rand() >= share) continue;
    const e = entries[Math.floor(rand() * n)];
    const at = Math.floor(rand() * e.content.length);
    const word = rand() < 0.5 ? q : q.toUpperCase();
    e.content = `${e.content.slice(0, at)} ${word} ${e.content.slice(at)}`;
  }
  return {
    id: `bench-${seed}-${String(index).padStart(5, '0')}`,
    name: `${pick(rand, EN)} ${pick(rand, ZH)} ${index}`,
    createdAt: 1_764_700_000_000 + index * 60_000,
    pinned: false,
    entries,
  };
}

/**
 * A Keepsake JSON export document (PROTOCOL.md "JSON export document") of `count` sessions, for
 * `sessions` import through the host or `keepsake-host import`.
 * @param {{seed: number, count: number, chars: number}} o
 * @returns {object}
 */
export function sessionsDocument({ seed, count, chars }) {
  const sessions = [];
  for (let i = 0; i < count; i++) sessions.push(savedSession({ seed, index: i, chars }));
  return { format: 'keepsake.sessions', version: 1, exportedAt: '2026-12-03T00:00:00+00:00', sessions, images: {} };
}
