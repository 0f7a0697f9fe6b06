// Saving the conversation settings. A maxSessions cap below the number of chats moves the oldest
// unpinned ones to Recently deleted at once (docs/keeps.md "Eviction"), so before such a save the
// page asks, naming them (sessions.evictionPlan), and afterwards it says which went (with Undo).
// No DOM here: `ask(question, rows)` is the page's confirm.

import { evictionQuestion } from '../lib/ui/keeps.js';

/**
 * saveSettings({storage, map, ask}) → {saved: true, evicted: [ids]} | {saved: false, cancelled: true}
 * With `map.maxSessions` > 0 the host is asked first which chats that cap would move; when there
 * are any, `ask(question, rows)` must resolve true before anything is written.
 */
export async function saveSettings({ storage, map, ask }) {
  const cap = map?.maxSessions;
  if (Number.isSafeInteger(cap) && cap > 0) {
    const plan = await storage.sessions.evictionPlan({ cap });
    const rows = Array.isArray(plan?.evict) ? plan.evict : [];
    const question = evictionQuestion(rows);
    if (question && !(await ask(question, rows))) return { saved: false, cancelled: true };
  }
  const r = await storage.settings.set({ map });
  return { saved: true, evicted: Array.isArray(r?.evicted) ? r.evicted : [] };
}
