// Which agent-server session belongs to which Keepsake chat (issue 21), for the `agent` provider
// kind (lib/agents.js: opencode keeps the transcript itself, so each Keepsake chat talks to one
// session of its own there). The map lives in the host, as the setting `agentSessions`
// (storage-model §9 "Agent sessions"), so it outlives the browser and never sits in browser storage:
//   {<Keepsake session id>: {baseUrl, agentSessionId, at}}
// An entry counts only for the server it was made on (same base URL, trailing slashes aside).

export const AGENT_SESSIONS_KEY = 'agentSessions';

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function sameBase(a, b) {
  const norm = (s) => {
    let x = String(s ?? '').trim();
    let end = x.length;
    while (end > 0 && x[end - 1] === '/') end--;
    return x.slice(0, end).toLowerCase();
  };
  return norm(a) === norm(b);
}

/**
 * @param {{storage: object, now?: () => number}} deps  storage: createStorage(...) client
 */
export function createAgentSessions({ storage, now = () => Date.now() }) {
  async function read() {
    const r = await storage.settings.get({ keys: [AGENT_SESSIONS_KEY] });
    return isObject(r?.[AGENT_SESSIONS_KEY]) ? r[AGENT_SESSIONS_KEY] : {};
  }
  return {
    /** The agent session of Keepsake chat `chatId` on the server at `baseUrl`, or null. */
    async lookup(chatId, baseUrl) {
      if (typeof chatId !== 'string' || chatId === '') return null;
      const e = (await read())[chatId];
      return isObject(e) && typeof e.agentSessionId === 'string' && e.agentSessionId && sameBase(e.baseUrl, baseUrl) ? e.agentSessionId : null;
    },
    /** Keepsake chat `chatId` goes on in `agentSessionId` on the server at `baseUrl`. */
    async remember(chatId, baseUrl, agentSessionId) {
      if (typeof chatId !== 'string' || chatId === '') return;
      const map = { ...(await read()) };
      map[chatId] = { baseUrl: String(baseUrl ?? ''), agentSessionId, at: now() };
      await storage.settings.set({ map: { [AGENT_SESSIONS_KEY]: map } });
    },
  };
}
