// The console's calls to its server: the token (kept in sessionStorage only, sent as
// `Authorization: Bearer`, never in a URL), the console's own JSON API under {console}/api/,
// the protocol at {base_path}, and what the session's grants allow.
'use strict';

(function () {
  const TOKEN_KEY = 'dsconsole.token';

  class ApiError extends Error {
    constructor(status, code, message, body, headers) {
      super(message || code || 'HTTP ' + status);
      this.name = 'ApiError';
      this.status = status;
      this.code = code || '';
      this.body = body || null;
      this.headers = headers || null;
    }
  }

  function getToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || '';
    } catch (e) {
      return '';
    }
  }

  function setToken(token) {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  }

  // Where the page is served: "/console" for "/console/" or "/console/index.html".
  function pagePath() {
    return location.pathname.replace(/\/(index\.html)?$/, '') || '';
  }

  const state = {
    session: null,
    consolePath: pagePath(),
    basePath: '/v1/stream',
    grants: [],
  };

  /** fetch with the token, never cached, never following a redirect elsewhere. */
  function request(method, url, options) {
    const opts = options || {};
    const headers = new Headers(opts.headers || {});
    const token = opts.token !== undefined ? opts.token : getToken();
    if (token) headers.set('Authorization', 'Bearer ' + token);
    return fetch(url, {
      method,
      headers,
      body: opts.body,
      signal: opts.signal,
      cache: 'no-store',
      credentials: 'same-origin',
      redirect: 'follow',
    });
  }

  /** An ApiError from a failed response: `{"error", "message"}` when the body is that. */
  async function errorFrom(resp) {
    let code = '';
    let message = '';
    let body = null;
    try {
      const text = resp.status === 204 || resp.status === 304 ? '' : await resp.text();
      if (text) {
        try {
          body = JSON.parse(text);
          if (body && typeof body === 'object') {
            code = typeof body.error === 'string' ? body.error : '';
            message = typeof body.message === 'string' ? body.message : '';
          }
        } catch (e) {
          message = text.slice(0, 500);
        }
      }
    } catch (e) {
      /* the body could not be read: the status says enough */
    }
    if (!message) message = 'HTTP ' + resp.status + (resp.statusText ? ' ' + resp.statusText : '');
    return new ApiError(resp.status, code, message, body, resp.headers);
  }

  /** GET {console}/api/<path> as JSON; throws ApiError. */
  async function api(path, options) {
    const resp = await request('GET', state.consolePath + '/api/' + path, options);
    if (!resp.ok) throw await errorFrom(resp);
    return resp.json();
  }

  /** A stream path's segments each percent-encoded, for URLs. */
  function encodePath(path) {
    return path.split('/').map(encodeURIComponent).join('/');
  }

  function streamUrl(path, query) {
    let url = state.basePath.replace(/\/+$/, '') + '/' + encodePath(path);
    if (query) {
      const q = new URLSearchParams();
      for (const key of Object.keys(query)) {
        if (query[key] !== undefined && query[key] !== null) q.set(key, query[key]);
      }
      const s = q.toString();
      if (s) url += '?' + s;
    }
    return url;
  }

  /** The route of a stream's page: its whole path as one encoded component. */
  function streamHref(path) {
    return '#/stream/' + encodeURIComponent(path);
  }

  // ---- grants: "<actions>:<prefix>", as core/auth/grants.py reads them --------------------

  function parseGrant(entry) {
    const colon = entry.indexOf(':');
    if (colon < 0) return null;
    const actions = entry.slice(0, colon).split(',').filter(Boolean);
    let prefix = entry.slice(colon + 1);
    if (prefix === '*') prefix = '';
    else {
      prefix = prefix.replace(/^\/+/, '');
      if (!prefix) return null;
    }
    return { actions: new Set(actions), prefix, text: entry };
  }

  function within(path, prefix) {
    if (!prefix || prefix.endsWith('/')) return path.startsWith(prefix);
    return path === prefix || path.startsWith(prefix + '/');
  }

  /** Whether the session may do `action` on `path` (the server decides anyway). */
  function allows(action, path) {
    const s = state.session;
    if (!s) return false;
    if (!s.auth) return true;
    if (action === 'read' && (s.public_prefixes || []).some((p) => within(path, p))) return true;
    return state.grants.some((g) => g.actions.has(action) && within(path, g.prefix));
  }

  /** Whether the session may do `action` on every stream (a grant on `*`). */
  function allowsEverywhere(action) {
    const s = state.session;
    if (!s) return false;
    if (!s.auth) return true;
    return state.grants.some((g) => g.actions.has(action) && g.prefix === '');
  }

  /** Whether any grant allows `action` somewhere (to show a form at all). */
  function allowsSomewhere(action) {
    const s = state.session;
    if (!s) return false;
    if (!s.auth) return true;
    return state.grants.some((g) => g.actions.has(action));
  }

  /** Load the session (with the stored token, or `token`); sets DS.state. */
  async function loadSession(token) {
    const session = await api('session', token !== undefined ? { token } : undefined);
    state.session = session;
    if (typeof session.console_path === 'string') state.consolePath = session.console_path;
    if (typeof session.base_path === 'string') state.basePath = session.base_path;
    state.grants = (session.grants || []).map(parseGrant).filter(Boolean);
    return session;
  }

  window.DS = window.DS || {};
  Object.assign(window.DS, {
    ApiError, state, getToken, setToken, request, errorFrom, api, encodePath, streamUrl,
    streamHref, parseGrant, within, allows, allowsEverywhere, allowsSomewhere, loadSession,
  });
})();
