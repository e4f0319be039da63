// The live tail of one stream, through the protocol itself:
//   1. catch up with plain GETs from the chosen offset until Stream-Up-To-Date;
//   2. then follow: SSE read through fetch and a streaming body reader for text/* and
//      application/json (EventSource cannot send the Authorization header), long-poll for
//      every other (binary) content type; reconnect from the last Stream-Next-Offset with the
//      last cursor when a connection ends, never after Stream-Closed.
// Offsets are opaque: they are only ever copied from the server's answers.
//
// Memory and the DOM stay bounded however fast the stream grows: messages waiting to be shown
// are capped at the limit N (older ones are counted and dropped before they are rendered), the
// DOM is updated once per animation frame, and it keeps the last N messages.
'use strict';

(function () {
  const { h, hexDump, truncate, fmtNumber, fmtClock, sleep } = window.DS;

  const MAX_TEXT_SHOWN = 2 * 1024 * 1024; // characters of one text chunk or JSON message
  // Characters the kept messages may hold in all: past it the oldest go, whatever N says, so
  // a tail of large messages stays within memory too (at least the newest one is kept).
  const CHARS_KEPT = 16 * 1024 * 1024;
  const MAX_BYTES_SHOWN = 64 * 1024; // bytes of one binary chunk in the hex dump
  const RETRY_FIRST_MS = 500;
  const RETRY_MAX_MS = 10000;

  /** How a content type is shown and followed. */
  function modeOf(contentType) {
    const media = (contentType || '').split(';')[0].trim().toLowerCase();
    if (media === 'application/json') return 'json';
    if (media.startsWith('text/')) return 'text';
    return 'binary';
  }

  /** An error the tail stops on (no retry): missing stream, refused, bad offset, gone. */
  class Stop extends Error {
    constructor(state, message, extra) {
      super(message);
      this.state = state;
      this.extra = extra || {};
    }
  }

  function base64Bytes(text) {
    const bin = atob(text.replace(/[\r\n]/g, ''));
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  class Tail {
    /**
     * options: path, contentType, list (the element messages go in), limit,
     * onStatus(state, text, extra), onProgress({offset, closed, received, shown}), follow()
     * (whether to keep the newest message in view).
     */
    constructor(options) {
      this.path = options.path;
      this.contentType = options.contentType;
      this.mode = modeOf(options.contentType);
      this.list = options.list;
      this.limit = options.limit || 1000;
      this.onStatus = options.onStatus || (() => {});
      this.onProgress = options.onProgress || (() => {});
      this.follow = options.follow || (() => true);
      this.generation = 0;
      this.controller = null;
      this.pending = [];
      this.frame = 0;
      this.timer = 0;
      this.nextFlushAt = 0;
      this.chars = 0; // characters the shown messages hold (see CHARS_KEPT)
      this.received = 0;
      this.offset = '-1';
      this.cursor = null;
      this.upToDate = false;
      this.closed = false;
      this.paused = false;
      this.state = 'idle';
      this.stats = { flushes: 0, flushMs: 0, maxFlushMs: 0, connections: 0 };
      this.decoder = null;
      this.list.addEventListener('click', (event) => this.onListClick(event));
      this.onOffsetClick = options.onOffsetClick || (() => {});
    }

    // ---- control ---------------------------------------------------------------------------

    /** Read from `offset` ("-1": the start, "now": the tail), forgetting what was shown. */
    start(offset) {
      this.halt();
      this.pending = [];
      this.list.replaceChildren();
      this.chars = 0;
      this.received = 0;
      this.offset = offset;
      this.cursor = null;
      this.upToDate = false;
      this.closed = false;
      this.paused = false;
      this.decoder = new TextDecoder('utf-8');
      this.run();
    }

    pause() {
      if (this.paused || this.closed) return;
      this.halt();
      this.paused = true;
      this.status('paused', 'paused at ' + this.offset);
    }

    /** Go on from where it paused: catch up first, then follow again. */
    resume() {
      if (!this.paused) return;
      this.paused = false;
      this.upToDate = false;
      this.run();
    }

    stop() {
      this.halt();
      if (this.frame) cancelAnimationFrame(this.frame);
      if (this.timer) clearTimeout(this.timer);
      this.frame = 0;
      this.timer = 0;
      this.pending = [];
    }

    setLimit(limit) {
      this.limit = Math.max(1, limit | 0);
      if (this.pending.length > this.limit) this.pending = this.pending.slice(-this.limit);
      this.trim();
      this.progress();
    }

    /** Drops the oldest shown messages past N, or past the character budget. */
    trim() {
      const list = this.list;
      while (list.childElementCount > this.limit || (this.chars > CHARS_KEPT && list.childElementCount > 1)) {
        this.chars -= list.firstElementChild.dsChars || 0;
        list.firstElementChild.remove();
      }
    }

    halt() {
      this.generation += 1;
      if (this.controller) this.controller.abort();
      this.controller = null;
    }

    status(state, text, extra) {
      this.state = state;
      this.onStatus(state, text, extra || {});
    }

    progress() {
      this.onProgress({
        offset: this.offset,
        closed: this.closed,
        received: this.received,
        shown: this.list.childElementCount,
        limit: this.limit,
      });
    }

    // ---- reading ---------------------------------------------------------------------------

    async run() {
      const generation = ++this.generation;
      const controller = new AbortController();
      this.controller = controller;
      const signal = controller.signal;
      const live = () => this.generation === generation;
      let wait = RETRY_FIRST_MS;
      this.status('connecting', 'connecting');
      while (live() && !this.closed) {
        try {
          if (!this.upToDate) await this.catchUp(live, signal);
          else if (this.mode === 'binary') await this.longPoll(live, signal);
          else await this.sse(live, signal);
          wait = RETRY_FIRST_MS;
        } catch (err) {
          if (!live() || (err && err.name === 'AbortError')) return;
          if (err instanceof Stop) {
            this.status(err.state, err.message, err.extra);
            return;
          }
          this.status('retrying', 'connection lost (' + (err.message || err) + '), retrying');
          try {
            await sleep(wait, signal);
          } catch (e) {
            return;
          }
          wait = Math.min(wait * 2, RETRY_MAX_MS);
        }
      }
      if (live() && this.closed) {
        this.status('closed', 'stream closed: every message has been read');
        this.progress();
      }
    }

    async fail(resp) {
      const err = await window.DS.errorFrom(resp);
      if (resp.status === 410) {
        const earliest =
          resp.headers.get('Stream-Earliest-Offset') ||
          (err.body && typeof err.body.earliest_offset === 'string' ? err.body.earliest_offset : '');
        if (earliest) {
          throw new Stop('gone', 'offset ' + this.offset + ' is before the earliest retained offset ' +
            earliest + ' (retention dropped it): ' + err.message, { earliest });
        }
        throw new Stop('error', 'the stream is gone (deleted while forks still read it): ' + err.message);
      }
      if (resp.status === 404) throw new Stop('error', 'no such stream (deleted?): ' + err.message);
      if (resp.status === 400 || resp.status === 401 || resp.status === 403) {
        throw new Stop('error', err.message);
      }
      throw err; // 5xx, 429...: retried
    }

    /** After a response: where to go on from, and whether that is the end. */
    advance(headers) {
      const next = headers.get('Stream-Next-Offset');
      if (next) this.offset = next;
      const cursor = headers.get('Stream-Cursor');
      if (cursor) this.cursor = cursor;
      if (headers.get('Stream-Closed') === 'true') this.closed = true;
      return headers.get('Stream-Up-To-Date') === 'true';
    }

    async catchUp(live, signal) {
      this.status('catching-up', 'catching up from ' + this.offset);
      for (;;) {
        const from = this.offset;
        const resp = await window.DS.request('GET', window.DS.streamUrl(this.path, { offset: from }), {
          signal,
        });
        if (!live()) return;
        if (!resp.ok) await this.fail(resp);
        // Bytes, decoded by the tail's own decoder: a character split between two reads
        // stays whole.
        this.deliverBytes(new Uint8Array(await resp.arrayBuffer()), from);
        if (!live()) return;
        const upToDate = this.advance(resp.headers);
        this.progress();
        if (!resp.headers.get('Stream-Next-Offset')) throw new Error('no Stream-Next-Offset in the answer');
        if (this.closed || upToDate) {
          this.upToDate = true;
          return;
        }
      }
    }

    async longPoll(live, signal) {
      this.status('live', 'live · long-poll');
      for (;;) {
        const from = this.offset;
        const query = { offset: from, live: 'long-poll' };
        if (this.cursor) query.cursor = this.cursor;
        const resp = await window.DS.request('GET', window.DS.streamUrl(this.path, query), { signal });
        if (!live()) return;
        if (resp.status === 204) {
          this.advance(resp.headers);
        } else if (resp.ok) {
          this.deliverBytes(new Uint8Array(await resp.arrayBuffer()), from);
          if (!live()) return;
          this.advance(resp.headers);
        } else {
          await this.fail(resp);
        }
        this.progress();
        if (this.closed) return;
      }
    }

    async sse(live, signal) {
      const query = { offset: this.offset, live: 'sse' };
      if (this.cursor) query.cursor = this.cursor;
      const resp = await window.DS.request('GET', window.DS.streamUrl(this.path, query), {
        signal,
        headers: { Accept: 'text/event-stream' },
      });
      if (!live()) return;
      if (!resp.ok) await this.fail(resp);
      this.stats.connections += 1;
      const base64 = (resp.headers.get('Stream-SSE-Data-Encoding') || '').toLowerCase() === 'base64';
      this.status('live', 'live · SSE');
      const reader = resp.body.getReader();
      const decoder = new TextDecoder('utf-8');
      let buffer = '';
      let event = '';
      let data = [];
      let payload = null; // the last data event, delivered with the control event after it
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (!live()) return;
          if (done) return; // the server ends a connection now and then: reconnect
          buffer += decoder.decode(value, { stream: true });
          let start = 0;
          for (;;) {
            const nl = buffer.indexOf('\n', start);
            if (nl < 0) break;
            let line = buffer.slice(start, nl);
            start = nl + 1;
            if (line.endsWith('\r')) line = line.slice(0, -1);
            if (line === '') {
              if (event === 'data') payload = data.join('\n');
              else if (event === 'control') {
                this.control(data.join('\n'), payload, base64);
                payload = null;
                if (this.closed) return;
              }
              event = '';
              data = [];
              continue;
            }
            if (line.charCodeAt(0) === 58 /* ':' comment */) continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            let v = colon < 0 ? '' : line.slice(colon + 1);
            if (v.charCodeAt(0) === 32) v = v.slice(1);
            if (field === 'event') event = v;
            else if (field === 'data') data.push(v);
          }
          buffer = buffer.slice(start);
        }
      } finally {
        reader.cancel().catch(() => {});
      }
    }

    control(json, payload, base64) {
      let control;
      try {
        control = JSON.parse(json);
      } catch (e) {
        throw new Error('a control event that is not JSON');
      }
      const from = this.offset;
      if (payload !== null) {
        if (base64) this.deliverBytes(base64Bytes(payload), from);
        else this.deliverText(payload, from);
      }
      if (typeof control.streamNextOffset === 'string') this.offset = control.streamNextOffset;
      if (typeof control.streamCursor === 'string') this.cursor = control.streamCursor;
      if (control.streamClosed === true) this.closed = true;
      this.progress();
    }

    // ---- messages --------------------------------------------------------------------------

    deliverText(text, offset) {
      if (this.mode === 'json') {
        let messages;
        try {
          messages = JSON.parse(text);
        } catch (e) {
          this.push({ kind: 'text', offset, text, note: 'not JSON: ' + e.message });
          return;
        }
        if (!Array.isArray(messages)) messages = [messages];
        const count = messages.length;
        // Only the newest `limit` can be shown: the others are counted, never rendered.
        const skip = Math.max(0, count - this.limit);
        this.received += skip;
        for (let i = skip; i < count; i++) {
          this.push({ kind: 'json', offset, index: i, count, value: messages[i] });
        }
      } else if (text.length) {
        this.push({ kind: 'text', offset, text });
      }
    }

    deliverBytes(bytes, offset) {
      if (!bytes.length) return;
      if (this.mode === 'text' || this.mode === 'json') {
        // Catch-up of a text stream read as text: decoded across reads, bad bytes as U+FFFD.
        this.deliverText(this.decoder.decode(bytes, { stream: true }), offset);
        return;
      }
      const shown = bytes.length > MAX_BYTES_SHOWN ? bytes.slice(0, MAX_BYTES_SHOWN) : bytes;
      this.push({ kind: 'binary', offset, bytes: shown, total: bytes.length });
    }

    push(record) {
      this.received += 1;
      record.seq = this.received;
      record.at = new Date();
      this.pending.push(record);
      if (this.pending.length > 2 * this.limit) this.pending = this.pending.slice(-this.limit);
      this.schedule();
    }

    /** The next flush: at the next frame, but never sooner after the last one than twice
     * what it took, so that a slow machine under a flood still has time for the person. */
    schedule() {
      if (this.frame || this.timer) return;
      const wait = this.nextFlushAt - performance.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = 0;
          this.frame = requestAnimationFrame(() => this.flush());
        }, wait);
      } else this.frame = requestAnimationFrame(() => this.flush());
    }

    flush() {
      const began = performance.now();
      this.frame = 0;
      let records = this.pending;
      this.pending = [];
      if (records.length > this.limit) records = records.slice(-this.limit);
      if (records.length) {
        const fragment = document.createDocumentFragment();
        let chars = 0;
        for (const record of records) {
          const el = this.render(record);
          chars += el.dsChars;
          fragment.appendChild(el);
        }
        if (records.length >= this.limit) {
          this.list.replaceChildren(fragment);
          this.chars = chars;
        } else {
          this.list.appendChild(fragment);
          this.chars += chars;
        }
        this.trim();
        if (this.follow()) this.list.scrollTop = this.list.scrollHeight;
      }
      this.progress();
      const took = performance.now() - began;
      this.nextFlushAt = performance.now() + 2 * took;
      this.stats.flushes += 1;
      this.stats.flushMs += took;
      this.stats.maxFlushMs = Math.max(this.stats.maxFlushMs, took);
    }

    render(record) {
      const head = h(
        'div',
        { class: 'msg-head' },
        h('span', { class: 'msg-seq', test: 'msg-seq', text: '#' + fmtNumber(record.seq) }),
        h('button', {
          type: 'button',
          class: 'msg-offset',
          test: 'msg-offset',
          title: 'read from this offset',
          text: record.offset === '-1' ? 'start' : record.offset,
        }),
        record.kind === 'json' && record.count > 1
          ? h('span', { class: 'msg-part', text: 'message ' + (record.index + 1) + ' of ' + record.count + ' read there' })
          : null,
        h('span', { class: 'msg-time', text: fmtClock(record.at) })
      );
      let body;
      let note = record.note || '';
      if (record.kind === 'json') {
        let text = JSON.stringify(record.value, null, 2);
        if (text === undefined) text = String(record.value);
        const [shown, left] = truncate(text, MAX_TEXT_SHOWN);
        if (left) note = fmtNumber(left) + ' more characters not shown';
        body = h('pre', { class: 'msg-body msg-json', test: 'msg-body', text: shown });
      } else if (record.kind === 'text') {
        const [shown, left] = truncate(record.text, MAX_TEXT_SHOWN);
        if (left) note = fmtNumber(left) + ' more characters not shown';
        body = h('pre', { class: 'msg-body msg-text', test: 'msg-body', text: shown });
      } else {
        body = h('pre', { class: 'msg-body msg-hex', test: 'msg-body', text: hexDump(record.bytes) });
        const size = fmtNumber(record.total) + ' byte' + (record.total === 1 ? '' : 's');
        head.appendChild(h('span', { class: 'msg-part', text: size }));
        if (record.total > record.bytes.length) {
          note = fmtNumber(record.total - record.bytes.length) + ' more bytes not shown';
        }
      }
      const el = h('div', { class: 'msg msg-' + record.kind, test: 'tail-message' }, head, body);
      if (note) el.appendChild(h('div', { class: 'msg-note', text: note }));
      el.dsChars = body.textContent.length; // what it holds, for the character budget
      return el;
    }

    onListClick(event) {
      const target = event.target;
      if (target instanceof HTMLElement && target.classList.contains('msg-offset')) {
        this.onOffsetClick(target.textContent === 'start' ? '-1' : target.textContent);
      }
    }
  }

  window.DS = window.DS || {};
  Object.assign(window.DS, { Tail, modeOf });
})();
