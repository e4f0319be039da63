// The Durable Streams console: a single page, hash routes (#/streams[?prefix=P],
// #/stream/<encodeURIComponent(path)>[?offset=O], #/subscriptions, #/overview), vanilla JS
// under a CSP of script-src by nonce and style-src 'self'. Everything the server sends (stream
// content, names, error messages) is put on the page with textContent, never parsed as HTML.
// The token lives in sessionStorage ('dsconsole.token') and travels only as
// `Authorization: Bearer`.
//
// Stable hooks for tests and scripts (ids unless marked [data-test]):
//   header   #nav-streams #nav-subscriptions #nav-overview #session-info #token-box
//            #token-input #token-use #token-forget #token-status #footer-version
//   dialog   #confirm-dialog #confirm-title #confirm-message #confirm-ok #confirm-cancel
//            (the page's own <dialog>, never window.confirm)
//   any page [data-test=error] (an error message, as text), #page-title
//   streams  #streams-prefix #streams-filter #streams-refresh #streams-table #streams-body
//            [data-test=stream-row] [data-test=stream-link] #streams-empty #streams-more
//            #streams-count #listing-off #open-form #open-path #open-submit
//            #create-form #create-path #create-type #create-type-custom #create-ttl
//            #create-submit #create-status #create-denied
//   stream   #stream-path #stream-state #stream-meta [data-test=meta-<name>] (content-type,
//            next-offset, closed, ttl, expires-at, retention, earliest-offset, etag,
//            forked-from) #meta-refresh
//            tail: #tail-status[data-state=connecting|catching-up|live|paused|closed|retrying|
//            error|gone] #tail-pause #tail-from-start #tail-from-now #tail-offset-input
//            #tail-jump #tail-limit #tail-follow #tail-clear #tail-received[data-count]
//            #tail-shown[data-count] #tail-position #tail-gone #tail-jump-earliest #tail-list
//            [data-test=tail-message] > [data-test=msg-offset], [data-test=msg-body]
//            append: #append-form #append-input #append-send #append-error (JSON or hex
//            refused before sending) #append-status #append-denied (why it is disabled)
//            actions: #stream-close #stream-delete #actions-denied #actions-status
//            operator: #stream-operator #sealed-share #producers-table [data-test=producer-row]
//            #forks-list [data-test=fork-link] #forks-age #operator-denied
//   subs     #subscriptions-list [data-test=subscription][data-id] #subscriptions-empty
//            #subscriptions-off #subscriptions-denied #subscriptions-summary
//            [data-test=subscription-link-row] #subscriptions-refresh
//   overview #plot-appends #plot-bytes #plot-reads (svg, path.plot-line) #stored-figures
//            #stored-bar #stored-age #overview-refresh #overview-denied
//            [data-test=figure-<key>] (streams, links_behind, ...)
//   script   window.DSConsole.stats(): the stream page's tail: received, flushes (DOM
//            updates), flushMs, maxFlushMs, connections (SSE)
'use strict';

(function () {
  const DS = window.DS;
  const {
    h, clear, fmtNumber, fmtDecimal, fmtBytes, fmtDuration, fmtTime, fmtRelative, timeEl,
    api, request, errorFrom, streamUrl, streamHref, encodePath, allows, allowsEverywhere,
    allowsSomewhere, state,
  } = DS;

  const $ = (id) => document.getElementById(id);
  const TAIL_LIMIT_DEFAULT = 1000;
  const TAIL_LIMIT_MAX = 100000;
  const LISTING_ROWS = 100;

  // ---- small building blocks ------------------------------------------------------------

  function errorBox(err, prefix) {
    const message = err && err.message ? err.message : String(err);
    const status = err && err.status ? ' (' + err.status + ')' : '';
    return h(
      'div',
      { class: 'alert alert-error', test: 'error', role: 'alert' },
      h('strong', { text: (prefix || 'Error') + status + ': ' }),
      h('span', { text: message })
    );
  }

  function notice(text, cls, props) {
    return h('div', Object.assign({ class: 'alert ' + (cls || 'alert-info') }, props || {}), text);
  }

  function card(title, props, ...kids) {
    return h(
      'section',
      Object.assign({ class: 'card' }, props || {}),
      title ? h('h2', { class: 'card-title', text: title }) : null,
      ...kids
    );
  }

  function badge(text, kind, props) {
    return h('span', Object.assign({ class: 'badge badge-' + (kind || 'neutral'), text }, props || {}));
  }

  function field(label, input, hint) {
    return h('label', { class: 'field' }, h('span', { class: 'field-label', text: label }), input, hint ? h('span', { class: 'field-hint', text: hint }) : null);
  }

  function kv(label, value, test) {
    return h(
      'div',
      { class: 'kv' },
      h('dt', { text: label }),
      h('dd', { test }, value instanceof Node ? value : h('span', { text: value === null || value === undefined || value === '' ? '–' : String(value) }))
    );
  }

  function mono(text, props) {
    return h('code', Object.assign({ class: 'mono', text: text === null || text === undefined ? '–' : String(text) }, props || {}));
  }

  function streamLink(path, props) {
    return h('a', Object.assign({ href: streamHref(path), class: 'stream-link', text: path }, props || {}));
  }

  /** The page's own confirmation dialog; resolves true when confirmed. */
  function confirmDialog(title, message, okLabel) {
    const dialog = $('confirm-dialog');
    $('confirm-title').textContent = title;
    $('confirm-message').textContent = message;
    $('confirm-ok').textContent = okLabel || 'Confirm';
    dialog.returnValue = '';
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
      dialog.showModal();
      $('confirm-cancel').focus();
    });
  }

  // ---- header: session and token ---------------------------------------------------------

  function tokenStatus(text, kind) {
    const el = $('token-status');
    el.textContent = text || '';
    el.className = 'token-status' + (kind ? ' token-status-' + kind : '');
    el.hidden = !text;
  }

  function renderSession() {
    const s = state.session;
    const info = clear($('session-info'));
    const box = $('token-box');
    if (!s) return;
    $('footer-version').textContent = s.version ? 'version ' + s.version : '';
    box.hidden = !s.auth;
    if (!s.auth) {
      info.appendChild(badge('access control off', 'muted', { title: 'every action is allowed' }));
      return;
    }
    if (s.authenticated) {
      info.appendChild(h('span', { class: 'session-label', text: 'token allows' }));
      const grants = s.grants || [];
      if (!grants.length) info.appendChild(badge('nothing', 'warn'));
      for (const g of grants) info.appendChild(badge(g, 'grant'));
    } else {
      info.appendChild(badge('no token', 'warn'));
      const pub = s.public_prefixes || [];
      if (pub.length) {
        info.appendChild(h('span', { class: 'session-label', text: 'public:' }));
        for (const p of pub) info.appendChild(badge(p, 'grant'));
      }
    }
    $('token-forget').disabled = !DS.getToken();
  }

  async function useToken(token) {
    try {
      await DS.loadSession(token);
    } catch (err) {
      tokenStatus('Token refused: ' + err.message, 'error');
      return;
    }
    DS.setToken(token);
    $('token-input').value = '';
    tokenStatus(token ? 'Token in use for this tab (kept in sessionStorage only).' : 'Token forgotten.', 'ok');
    renderSession();
    route();
  }

  function wireHeader() {
    $('token-box').addEventListener('submit', (event) => {
      event.preventDefault();
      const token = $('token-input').value.trim();
      if (token) useToken(token);
    });
    $('token-forget').addEventListener('click', () => useToken(''));
  }

  // ---- routing ------------------------------------------------------------------------------

  let leave = null;
  let currentTail = null; // the stream page's tail, for DSConsole.stats()

  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/streams';
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    return { path, query };
  }

  function route() {
    if (leave) leave();
    leave = null;
    const root = clear($('app'));
    const { path, query } = parseHash();
    const controller = new AbortController();
    const ctx = {
      root,
      query,
      signal: controller.signal,
      cleanups: [() => controller.abort()],
      every(ms, fn) {
        // A tick is skipped while the last one is still waiting on the server: a slow answer
        // (a scan) is never asked for again before it arrives.
        let busy = false;
        const timer = setInterval(async () => {
          if (busy) return;
          busy = true;
          try {
            await fn();
          } finally {
            busy = false;
          }
        }, ms);
        this.cleanups.push(() => clearInterval(timer));
      },
    };
    leave = () => ctx.cleanups.forEach((fn) => fn());
    let name = 'streams';
    let page = pageStreams;
    let arg = null;
    if (path.startsWith('/stream/')) {
      name = 'stream';
      page = pageStream;
      try {
        arg = decodeURIComponent(path.slice('/stream/'.length));
      } catch (e) {
        root.appendChild(errorBox(new Error('this address does not name a stream')));
        return;
      }
    } else if (path === '/subscriptions') {
      name = 'subscriptions';
      page = pageSubscriptions;
    } else if (path === '/overview') {
      name = 'overview';
      page = pageOverview;
    }
    for (const a of document.querySelectorAll('#nav a')) {
      const current = a.dataset.route === name || (name === 'stream' && a.dataset.route === 'streams');
      if (current) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    document.body.dataset.page = name;
    Promise.resolve(page(ctx, arg)).catch((err) => {
      if (err && err.name === 'AbortError') return;
      root.appendChild(errorBox(err));
    });
  }

  function pageHead(title, subtitle, ...extra) {
    return h(
      'div',
      { class: 'page-head' },
      h('div', null, h('h1', { id: 'page-title', text: title }), subtitle ? h('p', { class: 'muted', text: subtitle }) : null),
      h('div', { class: 'page-actions' }, ...extra)
    );
  }

  // ---- streams --------------------------------------------------------------------------------

  async function pageStreams(ctx) {
    const prefix = ctx.query.get('prefix') || '';
    const prefixInput = h('input', { id: 'streams-prefix', type: 'search', placeholder: 'prefix, e.g. chat/', value: prefix, spellcheck: 'false', autocomplete: 'off' });
    const filterForm = h(
      'form',
      { class: 'toolbar', id: 'streams-filter-form' },
      prefixInput,
      h('button', { type: 'submit', id: 'streams-filter', class: 'btn', text: 'Filter' }),
      h('button', { type: 'button', id: 'streams-refresh', class: 'btn btn-quiet', text: 'Refresh', onclick: () => route() }),
      h('span', { id: 'streams-count', class: 'muted toolbar-end' })
    );
    filterForm.addEventListener('submit', (event) => {
      event.preventDefault();
      const p = prefixInput.value.trim();
      const target = '#/streams' + (p ? '?prefix=' + encodeURIComponent(p) : '');
      if (location.hash === target) route();
      else location.hash = target;
    });
    const body = h('tbody', { id: 'streams-body' });
    const table = h(
      'table',
      { class: 'table', id: 'streams-table' },
      h('thead', null, h('tr', null, ...['Path', 'Content type', 'Size', 'State', 'TTL / expiry', 'Last activity'].map((t) => h('th', { text: t })))),
      body
    );
    const more = h('button', { type: 'button', id: 'streams-more', class: 'btn', text: 'Load more' });
    const moreBox = h('div', { class: 'more', hidden: true }, more);
    const listArea = h('div', { class: 'list-area' });
    const listCard = card(null, { class: 'card card-flush' }, filterForm, listArea);
    const side = h('div', { class: 'side' }, createCard(), openCard());
    ctx.root.append(
      pageHead('Streams', 'Every stream under a prefix, through the listing extension.'),
      h('div', { class: 'layout-main-side' }, listCard, side)
    );

    let shown = 0;
    let next = null;
    async function load(cursor) {
      more.disabled = true;
      const rows = [];
      let c = cursor;
      for (let i = 0; i < 50; i++) {
        const q = new URLSearchParams();
        if (prefix) q.set('prefix', prefix);
        if (c) q.set('cursor', c);
        const page = await api('streams' + (q.toString() ? '?' + q : ''), { signal: ctx.signal });
        rows.push(...(page.streams || []));
        c = page.next || null;
        if (!c || rows.length >= LISTING_ROWS) break;
      }
      next = c;
      for (const row of rows) body.appendChild(streamRow(row));
      shown += rows.length;
      $('streams-count').textContent = fmtNumber(shown) + (next ? '+' : '') + ' stream' + (shown === 1 ? '' : 's');
      more.parentElement.hidden = !next;
      more.disabled = false;
      const empty = $('streams-empty');
      if (empty) empty.hidden = shown > 0;
    }
    more.addEventListener('click', () => load(next).catch((err) => listArea.appendChild(errorBox(err))));

    try {
      await load(null);
      listArea.append(table, h('p', { id: 'streams-empty', class: 'empty', text: prefix ? 'No streams under “' + prefix + '”.' : 'No streams yet: create one.', hidden: shown > 0 }), moreBox);
    } catch (err) {
      if (err.name === 'AbortError') return;
      if (err.status === 404 && err.code === 'listing_off') {
        listArea.appendChild(
          h(
            'div',
            { class: 'alert alert-info', id: 'listing-off' },
            h('strong', { text: 'Listing is off on this server. ' }),
            h('span', { text: err.message + ' ' }),
            h('span', { text: 'Turn it on with DS_LISTING=true (dsaws serve has it on by default on loopback; a deployment: the template parameter EnableListing=true). Meanwhile, open a stream by its path.' })
          )
        );
      } else if (err.status === 401 || err.status === 403) {
        listArea.appendChild(errorBox(err, err.status === 401 ? 'A token is needed' : 'Not allowed'));
      } else listArea.appendChild(errorBox(err));
    }
  }

  function streamRow(row) {
    const expiry = [];
    if (row.ttl_seconds !== null && row.ttl_seconds !== undefined) expiry.push(h('span', { text: 'TTL ' + fmtDuration(row.ttl_seconds) }));
    if (row.expires_at) expiry.push(h('span', { class: 'muted' }, ' expires ', timeEl(row.expires_at)));
    return h(
      'tr',
      { test: 'stream-row' },
      h(
        'td',
        { class: 'cell-path' },
        streamLink(row.path, { test: 'stream-link' }),
        row.forked_from ? h('div', { class: 'muted small' }, 'fork of ', streamLink(row.forked_from)) : null
      ),
      h('td', null, mono(row.content_type)),
      h('td', { class: 'num', title: fmtNumber(row.bytes) + ' bytes', text: fmtBytes(row.bytes) }),
      h('td', null, row.closed ? badge('closed', 'closed') : badge('open', 'open')),
      h('td', null, expiry.length ? expiry : h('span', { class: 'muted', text: '–' })),
      h('td', null, row.last_activity ? timeEl(row.last_activity) : h('span', { class: 'muted', text: '–' }))
    );
  }

  function createCard() {
    const path = h('input', { id: 'create-path', type: 'text', placeholder: 'e.g. chat/room-1', required: true, spellcheck: 'false', autocomplete: 'off' });
    const type = h(
      'select',
      { id: 'create-type' },
      ['application/json', 'text/plain', 'application/octet-stream'].map((t) => h('option', { value: t, text: t })),
      h('option', { value: 'custom', text: 'custom…' })
    );
    const custom = h('input', { id: 'create-type-custom', type: 'text', placeholder: 'e.g. application/x-protobuf', hidden: true, spellcheck: 'false' });
    const ttl = h('input', { id: 'create-ttl', type: 'number', min: '1', step: '1', placeholder: 'seconds (optional)' });
    const submit = h('button', { type: 'submit', id: 'create-submit', class: 'btn btn-primary', text: 'Create stream' });
    const status = h('div', { id: 'create-status', class: 'form-status', role: 'status' });
    const denied = h('p', { id: 'create-denied', class: 'denied', hidden: true });
    const form = h(
      'form',
      { id: 'create-form', class: 'form' },
      field('Path', path),
      field('Content type', h('div', { class: 'stack' }, type, custom)),
      field('TTL', ttl, 'expires after this long without a read or write'),
      h('div', { class: 'form-buttons' }, submit),
      denied,
      status
    );
    function check() {
      const p = path.value.trim().replace(/^\/+/, '');
      let reason = '';
      if (!allowsSomewhere('create')) reason = 'Your token may not create streams.';
      else if (p && !allows('create', p)) reason = 'Your token may not create a stream at this path.';
      denied.textContent = reason;
      denied.hidden = !reason;
      submit.disabled = !!reason;
    }
    type.addEventListener('change', () => {
      custom.hidden = type.value !== 'custom';
      if (!custom.hidden) custom.focus();
    });
    path.addEventListener('input', check);
    check();
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const p = path.value.trim().replace(/^\/+/, '');
      const contentType = type.value === 'custom' ? custom.value.trim() : type.value;
      clear(status);
      if (!p) return status.appendChild(errorBox(new Error('a path is needed')));
      if (!contentType) return status.appendChild(errorBox(new Error('a content type is needed')));
      const headers = { 'Content-Type': contentType };
      if (ttl.value) headers['Stream-TTL'] = String(parseInt(ttl.value, 10));
      submit.disabled = true;
      try {
        const resp = await request('PUT', streamUrl(p), { headers });
        if (!resp.ok) throw await errorFrom(resp);
        location.hash = streamHref(p);
      } catch (err) {
        status.appendChild(errorBox(err, 'Not created'));
      } finally {
        submit.disabled = false;
        check();
      }
    });
    return card('New stream', { id: 'create-card' }, form);
  }

  function openCard() {
    const path = h('input', { id: 'open-path', type: 'text', placeholder: 'stream path', spellcheck: 'false', autocomplete: 'off' });
    const form = h('form', { id: 'open-form', class: 'toolbar' }, path, h('button', { type: 'submit', id: 'open-submit', class: 'btn', text: 'Open' }));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const p = path.value.trim().replace(/^\/+/, '');
      if (p) location.hash = streamHref(p);
    });
    return card('Open a stream by path', { id: 'open-card' }, form);
  }

  // ---- one stream -----------------------------------------------------------------------------

  async function head(path, signal) {
    const resp = await request('HEAD', streamUrl(path), { signal });
    if (!resp.ok) throw await errorFrom(resp);
    return resp.headers;
  }

  async function pageStream(ctx, path) {
    const titleState = h('span', { id: 'stream-state' });
    ctx.root.append(
      h('nav', { class: 'crumbs' }, h('a', { href: '#/streams', text: 'Streams' }), h('span', { class: 'crumb-sep', text: '/' }), h('span', { text: 'stream' })),
      h('div', { class: 'page-head' }, h('div', { class: 'title-row' }, h('h1', { id: 'stream-path', class: 'stream-title', text: path }), titleState))
    );
    let headers;
    try {
      headers = await head(path, ctx.signal);
    } catch (err) {
      if (err.name === 'AbortError') return;
      ctx.root.appendChild(errorBox(err, err.status === 404 ? 'No such stream' : 'Cannot read this stream'));
      return;
    }
    const contentType = headers.get('Content-Type') || 'application/octet-stream';
    const meta = {
      contentType,
      closed: headers.get('Stream-Closed') === 'true',
    };
    const metaCard = card(null, { class: 'card meta-card' });
    const tailCard = h('section', { class: 'card card-flush tail-card' });
    const side = h('div', { class: 'side' });
    side.appendChild(metaCard);
    ctx.root.append(h('div', { class: 'layout-main-side layout-wide' }, tailCard, side));

    const ui = { append: null, actions: null };
    function setClosed(closed) {
      meta.closed = closed;
      clear(titleState).append(badge(DS.modeOf(contentType) === 'json' ? 'JSON' : DS.modeOf(contentType), 'type'), closed ? badge('closed', 'closed') : badge('open', 'open'));
      if (ui.append) ui.append.update();
      if (ui.actions) ui.actions.update();
    }

    function renderMeta(hs) {
      clear(metaCard);
      const dl = h('dl', { class: 'kv-rows', id: 'stream-meta' });
      dl.append(
        kv('Content type', mono(hs.get('Content-Type')), 'meta-content-type'),
        kv('Next offset', mono(hs.get('Stream-Next-Offset')), 'meta-next-offset'),
        kv('Closed', hs.get('Stream-Closed') === 'true' ? 'yes' : 'no', 'meta-closed'),
        kv('TTL', hs.get('Stream-TTL') ? fmtDuration(hs.get('Stream-TTL')) : 'none', 'meta-ttl'),
        kv('Expires', hs.get('Stream-Expires-At') ? timeEl(hs.get('Stream-Expires-At')) : 'never', 'meta-expires-at'),
        kv('Retention', hs.get('Stream-Retention') || 'everything kept', 'meta-retention'),
        kv('Earliest offset', hs.get('Stream-Earliest-Offset') ? mono(hs.get('Stream-Earliest-Offset')) : 'the start', 'meta-earliest-offset'),
        kv('ETag', hs.get('ETag') ? mono(hs.get('ETag')) : '–', 'meta-etag')
      );
      if (hs.get('Stream-Forked-From')) {
        // A path under the stream root, which a server may name with the root's own path.
        const root = state.basePath.replace(/\/+$/, '') + '/';
        let source = hs.get('Stream-Forked-From');
        if (source.startsWith(root)) source = source.slice(root.length);
        dl.append(kv('Forked from', h('span', null, streamLink(source), hs.get('Stream-Fork-Offset') ? h('span', { class: 'muted' }, ' at ', mono(hs.get('Stream-Fork-Offset'))) : null), 'meta-forked-from'));
      }
      const refresh = h('button', { type: 'button', id: 'meta-refresh', class: 'btn btn-small btn-quiet', text: 'Refresh', onclick: () => refreshMeta() });
      metaCard.append(h('div', { class: 'card-head' }, h('h2', { class: 'card-title', text: 'Metadata (HEAD)' }), refresh), dl);
      setClosed(hs.get('Stream-Closed') === 'true');
    }

    async function refreshMeta() {
      try {
        renderMeta(await head(path, ctx.signal));
      } catch (err) {
        if (err.name === 'AbortError') return;
        clear(metaCard).appendChild(errorBox(err, err.status === 404 ? 'No such stream' : 'Cannot read this stream'));
      }
    }
    renderMeta(headers);

    const tail = tailPanel(ctx, path, contentType, tailCard, (closed) => {
      if (closed && !meta.closed) refreshMeta();
    }, (offset) => {
      // Offsets sort as strings (PROTOCOL section 8): the tail read past what HEAD said.
      const shown = metaCard.querySelector('[data-test=meta-next-offset] code');
      if (shown && offset !== '-1' && offset !== 'now' && offset > shown.textContent) shown.textContent = offset;
    });
    ui.append = appendPanel(path, contentType, side, meta, () => refreshMeta());
    ui.actions = actionsPanel(path, side, meta, () => refreshMeta(), tail);
    ui.append.update();
    ui.actions.update();
    operatorPanel(ctx, path, side);
  }

  function tailPanel(ctx, path, contentType, container, onClosed, onOffset) {
    const mode = DS.modeOf(contentType);
    const status = h('span', { id: 'tail-status', class: 'status', 'data-state': 'connecting', text: 'connecting' });
    const pause = h('button', { type: 'button', id: 'tail-pause', class: 'btn btn-small', text: 'Pause' });
    const fromStart = h('button', { type: 'button', id: 'tail-from-start', class: 'btn btn-small', text: 'From start' });
    const fromNow = h('button', { type: 'button', id: 'tail-from-now', class: 'btn btn-small', text: 'From now' });
    const offsetInput = h('input', { id: 'tail-offset-input', type: 'text', placeholder: 'offset', spellcheck: 'false', autocomplete: 'off', class: 'mono-input' });
    const jumpForm = h('form', { class: 'inline-form' }, offsetInput, h('button', { type: 'submit', id: 'tail-jump', class: 'btn btn-small', text: 'Jump' }));
    const limitInput = h('input', { id: 'tail-limit', type: 'number', min: '10', max: String(TAIL_LIMIT_MAX), step: '10', value: String(TAIL_LIMIT_DEFAULT), class: 'limit-input' });
    const follow = h('input', { id: 'tail-follow', type: 'checkbox', checked: true });
    const clearBtn = h('button', { type: 'button', id: 'tail-clear', class: 'btn btn-small btn-quiet', text: 'Clear' });
    const received = h('span', { id: 'tail-received', 'data-count': '0', text: '0 received' });
    const shown = h('span', { id: 'tail-shown', 'data-count': '0', text: 'showing 0' });
    const position = h('span', { id: 'tail-position', class: 'mono small' });
    const gone = h('div', { id: 'tail-gone', class: 'alert alert-warn', hidden: true });
    const list = h('div', { id: 'tail-list', class: 'tail-list tail-' + mode, role: 'log', 'aria-live': 'off' });
    const how = mode === 'binary' ? 'long-poll, hex dump' : mode === 'json' ? 'SSE, JSON messages' : 'SSE, text';
    container.append(
      h('div', { class: 'card-head' }, h('h2', { class: 'card-title' }, 'Live tail ', h('span', { class: 'muted small', text: '(' + how + ')' })), status),
      h('div', { class: 'tail-toolbar' }, pause, fromStart, fromNow, jumpForm),
      h(
        'div',
        { class: 'tail-toolbar tail-counters' },
        received,
        shown,
        h('label', { class: 'inline-label' }, 'keep last ', limitInput),
        h('label', { class: 'inline-label' }, follow, ' follow'),
        clearBtn,
        h('span', { class: 'toolbar-end' }, 'next ', position)
      ),
      gone,
      list
    );

    const tail = new DS.Tail({
      path,
      contentType,
      list,
      limit: TAIL_LIMIT_DEFAULT,
      follow: () => follow.checked,
      onOffsetClick: (offset) => {
        offsetInput.value = offset;
        offsetInput.focus();
      },
      onStatus: (st, text, extra) => {
        status.dataset.state = st;
        status.textContent = text;
        pause.textContent = st === 'paused' ? 'Resume' : 'Pause';
        pause.disabled = st === 'closed' || st === 'error' || st === 'gone';
        clear(gone);
        gone.hidden = st !== 'gone';
        if (st === 'gone') {
          gone.append(
            h('span', { text: text + ' ' }),
            h('button', { type: 'button', id: 'tail-jump-earliest', class: 'btn btn-small', text: 'Jump to earliest', onclick: () => tail.start(extra.earliest) })
          );
        } else if (st === 'error') {
          gone.hidden = false;
          gone.append(h('span', { test: 'error', text: text }));
        }
        if (st === 'closed') onClosed(true);
      },
      onProgress: (p) => {
        received.dataset.count = String(p.received);
        received.textContent = fmtNumber(p.received) + ' received';
        shown.dataset.count = String(p.shown);
        shown.textContent = (p.received > p.shown ? 'showing the last ' : 'showing ') + fmtNumber(p.shown);
        position.textContent = p.offset;
        onOffset(p.offset);
      },
    });
    pause.addEventListener('click', () => (tail.paused ? tail.resume() : tail.pause()));
    fromStart.addEventListener('click', () => tail.start('-1'));
    fromNow.addEventListener('click', () => tail.start('now'));
    jumpForm.addEventListener('submit', (event) => {
      event.preventDefault();
      const o = offsetInput.value.trim();
      if (o) tail.start(o);
    });
    limitInput.addEventListener('change', () => {
      let n = parseInt(limitInput.value, 10);
      if (!(n > 0)) n = TAIL_LIMIT_DEFAULT;
      n = Math.min(TAIL_LIMIT_MAX, Math.max(10, n));
      limitInput.value = String(n);
      tail.setLimit(n);
    });
    clearBtn.addEventListener('click', () => {
      list.replaceChildren();
      tail.chars = 0;
      tail.progress();
    });
    ctx.cleanups.push(() => tail.stop());
    currentTail = tail;
    const from = ctx.query.get('offset') || '-1';
    tail.start(from);
    return tail;
  }

  function appendPanel(path, contentType, side, meta, onAppended) {
    const mode = DS.modeOf(contentType);
    const placeholder = {
      json: '{"hello": "world"}\n\nAn array appends each element as a message.',
      text: 'text to append',
      binary: 'hex bytes, e.g. 48 65 6c 6c 6f',
    }[mode];
    const input = h('textarea', { id: 'append-input', class: 'mono-input', rows: '6', placeholder, spellcheck: 'false' });
    const send = h('button', { type: 'submit', id: 'append-send', class: 'btn btn-primary', text: 'Append' });
    const error = h('div', { id: 'append-error', class: 'form-error', role: 'alert' });
    const status = h('div', { id: 'append-status', class: 'form-status', role: 'status' });
    const denied = h('p', { id: 'append-denied', class: 'denied', hidden: true });
    const form = h('form', { id: 'append-form', class: 'form' }, denied, input, h('div', { class: 'form-buttons' }, send, h('span', { class: 'muted small', text: 'Ctrl+Enter sends' })), error, status);
    side.appendChild(card('Append · ' + (mode === 'json' ? 'JSON' : mode === 'text' ? 'text' : 'hex bytes'), { id: 'append-card' }, form));

    let body = null; // what would be sent, or null
    function validate() {
      const text = input.value;
      error.textContent = '';
      body = null;
      if (!text.trim()) return;
      if (mode === 'json') {
        try {
          JSON.parse(text);
          body = text;
        } catch (e) {
          error.textContent = 'Not JSON: ' + e.message;
        }
      } else if (mode === 'binary') {
        const parsed = DS.parseHex(text);
        if (parsed.error) error.textContent = 'Not hex: ' + parsed.error;
        else body = parsed.bytes;
      } else body = text;
    }
    function allowed() {
      return allows('append', path) && !meta.closed;
    }
    function update() {
      const ok = allowed();
      input.disabled = !ok;
      send.disabled = !ok || body === null;
      let reason = '';
      if (!allows('append', path)) reason = 'Your token may not append to this stream.';
      else if (meta.closed) reason = 'The stream is closed: no more appends.';
      denied.textContent = reason;
      denied.hidden = !reason;
    }
    input.addEventListener('input', () => {
      validate();
      update();
    });
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      validate();
      update();
      if (body === null || send.disabled) return;
      send.disabled = true;
      clear(status);
      try {
        const resp = await request('POST', streamUrl(path), { headers: { 'Content-Type': contentType }, body });
        if (!resp.ok) throw await errorFrom(resp);
        status.appendChild(h('span', { class: 'ok' }, 'Appended; next offset ', mono(resp.headers.get('Stream-Next-Offset'))));
        input.value = '';
        body = null;
        onAppended();
      } catch (err) {
        status.appendChild(errorBox(err, 'Not appended'));
      } finally {
        update();
      }
    });
    return { update };
  }

  function actionsPanel(path, side, meta, onChange, tail) {
    const closeBtn = h('button', { type: 'button', id: 'stream-close', class: 'btn btn-warn', text: 'Close stream…' });
    const deleteBtn = h('button', { type: 'button', id: 'stream-delete', class: 'btn btn-danger', text: 'Delete stream…' });
    const status = h('div', { class: 'form-status', id: 'actions-status' });
    const denied = h('p', { id: 'actions-denied', class: 'denied', hidden: true });
    side.appendChild(
      card('Close or delete', { id: 'actions-card' }, h('p', { class: 'muted small', text: 'Closing keeps every message and refuses further appends. Deleting removes the stream and its data.' }), h('div', { class: 'form-buttons' }, closeBtn, deleteBtn), denied, status)
    );
    function update() {
      const canClose = allows('append', path);
      const canDelete = allows('delete', path);
      closeBtn.disabled = !canClose || meta.closed;
      deleteBtn.disabled = !canDelete;
      const reasons = [];
      if (!canClose) reasons.push('Your token may not close this stream (append).');
      if (!canDelete) reasons.push('Your token may not delete this stream.');
      denied.textContent = reasons.join(' ');
      denied.hidden = !reasons.length;
    }
    closeBtn.addEventListener('click', async () => {
      if (!(await confirmDialog('Close this stream?', 'Close “' + path + '”: readers reach its end and no more appends are accepted. This cannot be undone.', 'Close stream'))) return;
      clear(status);
      try {
        const resp = await request('POST', streamUrl(path), { headers: { 'Stream-Closed': 'true' } });
        if (!resp.ok) throw await errorFrom(resp);
        status.appendChild(h('span', { class: 'ok', text: 'Closed.' }));
        onChange();
      } catch (err) {
        status.appendChild(errorBox(err, 'Not closed'));
      }
    });
    deleteBtn.addEventListener('click', async () => {
      if (!(await confirmDialog('Delete this stream?', 'Delete “' + path + '” and all its data. This cannot be undone.', 'Delete stream'))) return;
      clear(status);
      try {
        const resp = await request('DELETE', streamUrl(path));
        if (!resp.ok) throw await errorFrom(resp);
        tail.stop();
        location.hash = '#/streams';
      } catch (err) {
        status.appendChild(errorBox(err, 'Not deleted'));
      }
    });
    return { update };
  }

  async function operatorPanel(ctx, path, side) {
    const body = h('div', { id: 'stream-operator' });
    side.appendChild(card('Storage, producers and forks', { id: 'operator-card' }, body));
    if (!allows('operate', path)) {
      body.appendChild(h('p', { id: 'operator-denied', class: 'muted small', text: 'Sealing, producers and forks need an operate grant on this stream.' }));
      return;
    }
    try {
      const info = await api('stream/' + encodePath(path), { signal: ctx.signal });
      const share = Number(info.sealed_share) || 0;
      body.append(
        h('div', { class: 'share' }, h('div', { class: 'share-text', id: 'sealed-share' }, h('strong', { text: fmtDecimal(share * 100) + '% sealed' }), h('span', { class: 'muted', text: ' · ' + fmtBytes(info.sealed_bytes) + ' of ' + fmtBytes(info.bytes) })), DS.shareBar(share, 'sealed-bar')),
        h(
          'dl',
          { class: 'kv-list' },
          kv('Forks reading it', fmtNumber(info.ref_count), 'op-ref-count'),
          info.forked_from ? kv('Forked from', h('span', null, streamLink(info.forked_from), ' at ', mono(info.fork_offset)), 'op-forked-from') : null,
          kv('Retention', info.retention || 'everything kept', 'op-retention'),
          info.earliest_offset ? kv('Earliest offset', mono(info.earliest_offset), 'op-earliest') : null,
          info.pending_cut ? kv('Pending cut', h('span', null, mono(info.pending_cut.earliest_offset), ' ', timeEl(info.pending_cut.effective_at)), 'op-pending-cut') : null,
          info.compaction_refused ? kv('Compaction refused', info.compaction_refused, 'op-compaction-refused') : null
        )
      );
      const producers = info.producers || [];
      body.append(h('h3', { class: 'sub-title', text: 'Producers' }));
      if (!producers.length) body.appendChild(h('p', { class: 'muted small', text: 'No idempotent producer has written to it.' }));
      else {
        body.appendChild(
          h(
            'table',
            { class: 'table table-compact', id: 'producers-table' },
            h('thead', null, h('tr', null, h('th', { text: 'Producer' }), h('th', { class: 'num', text: 'Epoch' }), h('th', { class: 'num', text: 'Last seq' }))),
            h('tbody', null, producers.map((p) => h('tr', { test: 'producer-row' }, h('td', null, mono(p.id)), h('td', { class: 'num', text: fmtNumber(p.epoch) }), h('td', { class: 'num', text: fmtNumber(p.last_seq) }))))
          )
        );
      }
    } catch (err) {
      if (err.name === 'AbortError') return;
      body.appendChild(errorBox(err));
    }
    const forks = h('div', { id: 'forks' });
    body.append(h('h3', { class: 'sub-title', text: 'Forks' }), forks);
    try {
      const f = await api('forks/' + encodePath(path), { signal: ctx.signal });
      const names = f.forks || [];
      if (!names.length) forks.appendChild(h('p', { class: 'muted small', text: 'No forks.' }));
      else forks.appendChild(h('ul', { id: 'forks-list', class: 'plain-list' }, names.map((n) => h('li', null, streamLink(n, { test: 'fork-link' })))));
      forks.appendChild(h('p', { id: 'forks-age', class: 'muted small', text: 'as of ' + fmtDuration(f.age_seconds) + ' ago (a scan, cached a minute)' }));
    } catch (err) {
      if (err.name === 'AbortError') return;
      forks.appendChild(errorBox(err));
    }
  }

  // ---- subscriptions --------------------------------------------------------------------------

  async function pageSubscriptions(ctx) {
    const refresh = h('button', { type: 'button', id: 'subscriptions-refresh', class: 'btn', text: 'Refresh', onclick: () => load() });
    const summary = h('div', { id: 'subscriptions-summary', class: 'figures' });
    const list = h('div', { id: 'subscriptions-list', class: 'sub-list' });
    ctx.root.append(pageHead('Subscriptions', 'Durable cursors over many streams: how far behind each link is, pending wakes, webhook failures.', refresh), summary, list);
    if (!allowsEverywhere('operate')) {
      list.appendChild(notice('Subscriptions need an operate grant on every stream (operate:*).', 'alert-info', { id: 'subscriptions-denied' }));
      return;
    }
    async function load() {
      let data;
      try {
        data = await api('subscriptions', { signal: ctx.signal });
      } catch (err) {
        if (err.name === 'AbortError') return;
        clear(summary);
        clear(list);
        if (err.status === 404 && err.code === 'subscriptions_off') {
          list.appendChild(h('div', { class: 'alert alert-info', id: 'subscriptions-off' }, h('strong', { text: 'Subscriptions are off on this server. ' }), h('span', { text: err.message })));
        } else list.appendChild(errorBox(err));
        return;
      }
      const subs = data.subscriptions || [];
      clear(summary);
      clear(list);
      const failed = subs.filter((s) => s.status === 'failed').length;
      let behind = 0;
      let backlog = 0;
      let links = 0;
      for (const s of subs) {
        for (const l of s.links || []) {
          links += 1;
          if (l.behind_bytes > 0) behind += 1;
          backlog += Number(l.behind_bytes) || 0;
        }
      }
      summary.append(
        figure('Subscriptions', fmtNumber(subs.length), 'subscriptions'),
        figure('Failing', fmtNumber(failed), 'failing', failed ? 'bad' : ''),
        figure('Links', fmtNumber(links), 'links'),
        figure('Links behind', fmtNumber(behind), 'links-behind', behind ? 'warn' : ''),
        figure('Backlog', fmtBytes(backlog), 'backlog')
      );
      if (!subs.length) {
        list.appendChild(h('p', { id: 'subscriptions-empty', class: 'empty', text: 'No subscriptions. Create one with PUT {stream root}/__ds/subscriptions/<id> (see docs/subscriptions.md).' }));
        return;
      }
      for (const s of subs) list.appendChild(subscriptionCard(s));
    }
    await load();
    ctx.every(10000, load);
  }

  function subscriptionCard(s) {
    const facts = h(
      'dl',
      { class: 'kv-grid kv-grid-compact' },
      kv('Pattern', mono(s.pattern), 'sub-pattern'),
      s.type === 'webhook' ? kv('Webhook', mono(s.webhook_url), 'sub-webhook') : kv('Wake stream', s.wake_stream ? streamLink(s.wake_stream) : '–', 'sub-wake-stream'),
      kv('Failed attempts', fmtNumber(s.failed_attempts || 0), 'sub-failed'),
      kv('Next attempt', s.next_attempt_at ? timeEl(s.next_attempt_at) : '–', 'sub-next-attempt'),
      kv('Pending wake', s.wake ? wakeText(s.wake) : 'none', 'sub-wake')
    );
    const linkRows = (s.links || []).map((l) =>
      h(
        'tr',
        { test: 'subscription-link-row' },
        h('td', null, streamLink(l.path)),
        h('td', null, badge(l.link_type, 'muted')),
        h('td', null, mono(l.acked_offset)),
        h('td', null, mono(l.tail_offset)),
        h('td', { class: 'num' + (l.behind_bytes > 0 ? ' behind' : ''), text: fmtBytes(l.behind_bytes) }),
        h('td', null, l.has_pending ? badge('pending', 'warn') : badge('caught up', 'open'))
      )
    );
    const table = linkRows.length
      ? h(
          'table',
          { class: 'table table-compact' },
          h('thead', null, h('tr', null, ...['Stream', 'Link', 'Acked offset', 'Tail offset', 'Behind', ''].map((t) => h('th', { text: t })))),
          h('tbody', null, linkRows)
        )
      : h('p', { class: 'muted small', text: 'No streams linked yet.' });
    const el = h(
      'section',
      { class: 'card sub-card', test: 'subscription' },
      h(
        'div',
        { class: 'card-head' },
        h('h2', { class: 'card-title' }, h('span', { class: 'mono', text: s.id }), ' ', badge(s.type, 'type'), ' ', s.status === 'failed' ? badge('failed', 'bad') : badge(s.status || 'active', 'open')),
        s.description ? h('span', { class: 'muted', text: s.description }) : null
      ),
      facts,
      table
    );
    el.dataset.id = s.id;
    return el;
  }

  function wakeText(w) {
    return h(
      'span',
      null,
      mono(w.id),
      ' issued ',
      timeEl(w.issued_at),
      w.holder ? h('span', null, ' · held by ', mono(w.holder)) : ' · unclaimed',
      w.lease_expires_at ? h('span', null, ' · lease ends ', timeEl(w.lease_expires_at)) : null,
      ' · ' + fmtNumber(w.streams) + ' stream' + (w.streams === 1 ? '' : 's')
    );
  }

  function figure(label, value, key, tone) {
    return h('div', { class: 'figure' + (tone ? ' figure-' + tone : ''), test: 'figure-' + key }, h('div', { class: 'figure-value', text: value }), h('div', { class: 'figure-label', text: label }));
  }

  // ---- overview -------------------------------------------------------------------------------

  const STORED_SHOWN = {
    streams: ['Streams', fmtNumber],
    streams_closed: ['Closed streams', fmtNumber],
    stream_bytes: ['Stream bytes', fmtBytes],
    marks_waiting: ['Seal marks waiting', fmtNumber],
    incarnations_to_collect: ['Incarnations to collect', fmtNumber],
    subscriptions: ['Subscriptions', fmtNumber],
    links_behind: ['Links behind', fmtNumber],
    subscription_backlog_bytes: ['Subscription backlog', fmtBytes],
    producers: ['Producers', fmtNumber],
  };
  const STORED_IN_BAR = ['bytes_inline', 'bytes_unsealed_in_s3', 'bytes_sealed', 'sealed_share'];

  async function pageOverview(ctx) {
    const refresh = h('button', { type: 'button', id: 'overview-refresh', class: 'btn', text: 'Refresh figures' });
    const rates = h('div', { class: 'plots', id: 'rates' });
    const stored = h('div', { id: 'stored' });
    const ratesNote = h('p', { class: 'muted small', id: 'rates-note' });
    ctx.root.append(
      pageHead('Overview', 'What this server is doing, and what is stored.', refresh),
      card('Activity', { id: 'activity-card' }, ratesNote, rates),
      card('Stored', { id: 'stored-card' }, stored)
    );
    if (!allowsEverywhere('operate')) {
      clear(ctx.root.querySelector('#activity-card')).appendChild(notice('The overview needs an operate grant on every stream (operate:*).', 'alert-info', { id: 'overview-denied' }));
      ctx.root.querySelector('#stored-card').remove();
      refresh.disabled = true;
      return;
    }
    let fetchedAt = 0;
    let storedAge = 0;

    function renderRates(r) {
      const now = Date.now() / 1000;
      const series = r.series || {};
      clear(rates);
      if (r.error) {
        ratesNote.textContent = r.error;
        return;
      }
      ratesNote.textContent = 'Per second, over the last ' + fmtDuration(r.window_seconds) + ' in steps of ' + fmtDuration(r.step_seconds) + '. Counted by ' + (r.source || 'the server') + ', not by scanning the store.';
      const plot = (title, key, unit, format, test) => {
        const points = series[key] || [];
        // The last step is the one in progress: its rate is over the part of it gone by.
        const step = r.step_seconds || 1;
        const lastPoint = points.length ? points[points.length - 1] : null;
        const elapsed = lastPoint && r.now ? Math.min(step, Math.max(1, r.now - lastPoint[0])) : step;
        const last = lastPoint ? Number(lastPoint[1]) / elapsed : 0;
        const total = points.reduce((s, p) => s + (Number(p[1]) || 0), 0);
        return h(
          'div',
          { class: 'plot-box' },
          h('div', { class: 'plot-head' }, h('h3', { text: title }), h('span', { class: 'plot-now', text: format(last) + (unit.startsWith('/') ? '' : ' ') + unit }), h('span', { class: 'muted small', text: (key === 'bytes_appended' ? fmtBytes(total) : fmtNumber(total)) + ' in the window' })),
          DS.lineChart({ points, step: r.step_seconds, window: r.window_seconds, now, unit, format, test, label: title })
        );
      };
      const bytesPerSecond = (v) => fmtBytes(Math.round(v)) + '';
      rates.append(
        plot('Appends', 'appends', 'appends/s', fmtDecimal, 'plot-appends'),
        plot('Bytes appended', 'bytes_appended', '/s', bytesPerSecond, 'plot-bytes'),
        plot('Reads', 'reads', 'reads/s', fmtDecimal, 'plot-reads')
      );
      for (const svgEl of rates.querySelectorAll('svg.plot')) svgEl.id = svgEl.dataset.test;
    }

    function renderStored(s) {
      clear(stored);
      const age = h('span', { id: 'stored-age', class: 'muted small' });
      const tick = () => {
        age.textContent = 'as of ' + fmtDuration(storedAge + (Date.now() - fetchedAt) / 1000) + ' ago (a scan of the store, cached by the server)';
      };
      tick();
      const figures = h('div', { class: 'figures', id: 'stored-figures' });
      for (const key of Object.keys(STORED_SHOWN)) {
        if (!(key in s)) continue;
        const [label, format] = STORED_SHOWN[key];
        const tone = (key === 'links_behind' || key === 'marks_waiting' || key === 'incarnations_to_collect') && s[key] > 0 ? 'warn' : '';
        figures.appendChild(figure(label, format(s[key]), key, tone));
      }
      const bar = DS.stackedBar(
        [
          { label: 'Inline (DynamoDB)', value: s.bytes_inline, cls: 'part-inline' },
          { label: 'In S3, unsealed', value: s.bytes_unsealed_in_s3, cls: 'part-s3' },
          { label: 'Sealed', value: s.bytes_sealed, cls: 'part-sealed' },
        ],
        { format: fmtBytes, test: 'stored-bar', label: 'bytes by where they are stored' }
      );
      bar.id = 'stored-bar';
      const extras = Object.keys(s).filter((k) => !(k in STORED_SHOWN) && !STORED_IN_BAR.includes(k) && (typeof s[k] === 'number' || typeof s[k] === 'string'));
      stored.append(
        h('div', { class: 'card-head' }, h('h3', { class: 'sub-title', text: 'Bytes by where they are' }), age),
        bar,
        figures,
        extras.length
          ? h('details', { class: 'more-figures' }, h('summary', { text: 'More figures' }), h('dl', { class: 'kv-grid kv-grid-compact' }, extras.map((k) => kv(k.replace(/_/g, ' '), typeof s[k] === 'number' ? fmtNumber(s[k]) : s[k], 'stored-' + k))))
          : null
      );
      return tick;
    }

    let tick = null;
    async function load(force) {
      try {
        const data = await api('overview' + (force ? '?refresh=1' : ''), { signal: ctx.signal });
        fetchedAt = Date.now();
        storedAge = Number(data.stored_age_seconds) || 0;
        renderRates(data.rates || {});
        tick = renderStored(data.stored || {});
      } catch (err) {
        if (err.name === 'AbortError') return;
        clear(rates).appendChild(errorBox(err));
      }
    }
    refresh.addEventListener('click', async () => {
      refresh.disabled = true;
      await load(true);
      refresh.disabled = false;
    });
    await load(false);
    ctx.every(5000, () => load(false));
    ctx.every(1000, () => tick && tick());
  }

  // ---- start ---------------------------------------------------------------------------------

  async function boot() {
    wireHeader();
    try {
      await DS.loadSession();
    } catch (err) {
      if (err.status === 401 && DS.getToken()) {
        DS.setToken('');
        tokenStatus('The stored token was refused and forgotten: ' + err.message, 'error');
        try {
          await DS.loadSession('');
        } catch (err2) {
          clear($('app')).appendChild(errorBox(err2, 'The console cannot reach its server'));
          return;
        }
      } else {
        clear($('app')).appendChild(errorBox(err, 'The console cannot reach its server'));
        return;
      }
    }
    renderSession();
    window.addEventListener('hashchange', route);
    route();
  }

  // For tests and the curious: the session, and the hooks above.
  window.DSConsole = {
    state,
    route,
    version: () => state.session && state.session.version,
    // The tail's work: DOM updates (flushes, their total and longest time in ms), SSE
    // connections opened.
    stats: () => (currentTail ? Object.assign({ received: currentTail.received }, currentTail.stats) : null),
  };

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
  else boot();
})();
