// The errors the worker's chat handlers answer with (README "Worker chat handlers"): an Error
// carrying a wire code, and the `{code, message, kind, status?}` a chat.error event shows.

/** An Error carrying a wire `code` (the handler map turns it into `{ok: false, error}`). */
export function codeError(code, message, extra = {}) {
  const e = new Error(message);
  e.code = code;
  Object.assign(e, extra);
  return e;
}

/** `{code, message, kind, status?}` for a chat.error event. */
export function errorInfo(e, { stopped = false } = {}) {
  const kind = e?.kind ?? (e?.code ? 'storage' : 'error');
  let code = e?.code;
  if (!code) code = kind === 'http' && e?.status ? `http_${e.status}` : kind;
  if (kind === 'aborted' && stopped) code = 'stopped';
  const info = { code: String(code), message: String(e?.message ?? e ?? 'error'), kind };
  if (e?.status != null) info.status = e.status;
  return info;
}
