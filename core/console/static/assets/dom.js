// DOM and formatting helpers of the console. Everything that puts text from the server on the
// page goes through textContent (h(..., {text}) or a string child, which becomes a text node):
// nothing here parses HTML, sets a style attribute or evaluates code.
'use strict';

(function () {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  // Set as properties, not attributes (their attribute is only the initial value).
  const PROPS = new Set(['value', 'checked', 'disabled', 'selected', 'readOnly', 'hidden']);

  function apply(el, props) {
    if (!props) return;
    for (const key of Object.keys(props)) {
      const v = props[key];
      if (v === undefined || v === null || v === false) continue;
      if (key === 'style') throw new Error('style attributes are refused by the CSP: use a class');
      if (key === 'class') el.setAttribute('class', v);
      else if (key === 'text') el.textContent = String(v);
      else if (key === 'test') el.setAttribute('data-test', v);
      else if (key.startsWith('on') && typeof v === 'function') {
        el.addEventListener(key.slice(2), v);
      } else if (PROPS.has(key)) el[key] = v;
      else el.setAttribute(key, v === true ? '' : String(v));
    }
  }

  function append(el, kids) {
    for (const kid of kids) {
      if (kid === undefined || kid === null || kid === false) continue;
      if (Array.isArray(kid)) append(el, kid);
      else if (kid instanceof Node) el.appendChild(kid);
      else el.appendChild(document.createTextNode(String(kid)));
    }
  }

  /** An HTML element: h('a', {href, class, text, test, onclick}, ...children). */
  function h(tag, props, ...kids) {
    const el = document.createElement(tag);
    apply(el, props);
    append(el, kids);
    return el;
  }

  /** An SVG element, attributes set with setAttribute (presentation attributes, not style). */
  function svg(tag, props, ...kids) {
    const el = document.createElementNS(SVG_NS, tag);
    apply(el, props);
    append(el, kids);
    return el;
  }

  function clear(el) {
    el.replaceChildren();
    return el;
  }

  const numberFormat = new Intl.NumberFormat('en-US');
  const decimalFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });

  function fmtNumber(n) {
    if (n === null || n === undefined || Number.isNaN(Number(n))) return '–';
    return numberFormat.format(n);
  }

  function fmtDecimal(n) {
    if (n === null || n === undefined || Number.isNaN(Number(n))) return '–';
    return decimalFormat.format(n);
  }

  function fmtBytes(n) {
    if (n === null || n === undefined || Number.isNaN(Number(n))) return '–';
    n = Number(n);
    if (Math.abs(n) < 1024) return numberFormat.format(n) + ' B';
    const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = -1;
    do {
      n /= 1024;
      i += 1;
    } while (Math.abs(n) >= 1024 && i < units.length - 1);
    return (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2)) + ' ' + units[i];
  }

  function fmtDuration(seconds) {
    if (seconds === null || seconds === undefined) return '–';
    let s = Math.max(0, Math.round(Number(seconds)));
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min' + (s % 60 ? ' ' + (s % 60) + ' s' : '');
    if (s < 86400) {
      const m = Math.floor((s % 3600) / 60);
      return Math.floor(s / 3600) + ' h' + (m ? ' ' + m + ' min' : '');
    }
    s = Math.floor(s / 3600);
    return Math.floor(s / 24) + ' d' + (s % 24 ? ' ' + (s % 24) + ' h' : '');
  }

  function pad(n, width) {
    return String(n).padStart(width || 2, '0');
  }

  /** Local "YYYY-MM-DD HH:MM:SS" of an ISO time, or the text itself when it does not parse. */
  function fmtTime(iso) {
    if (!iso) return '–';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return String(iso);
    return (
      d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds())
    );
  }

  function fmtClock(date) {
    return pad(date.getHours()) + ':' + pad(date.getMinutes()) + ':' + pad(date.getSeconds());
  }

  /** "3 min ago" / "in 5 s" for an ISO time. */
  function fmtRelative(iso) {
    if (!iso) return '–';
    const t = new Date(iso).getTime();
    if (Number.isNaN(t)) return String(iso);
    const delta = (t - Date.now()) / 1000;
    if (Math.abs(delta) < 1) return 'just now';
    return delta < 0 ? fmtDuration(-delta) + ' ago' : 'in ' + fmtDuration(delta);
  }

  /** A <time> element showing a relative time, the exact local time as its tooltip. */
  function timeEl(iso, props) {
    const el = h('time', Object.assign({ text: fmtRelative(iso) }, props || {}));
    if (iso) {
      el.setAttribute('datetime', String(iso));
      el.title = fmtTime(iso);
    }
    return el;
  }

  /** [the first `max` characters, how many were left out]. */
  function truncate(text, max) {
    if (text.length <= max) return [text, 0];
    return [text.slice(0, max), text.length - max];
  }

  const HEX = [];
  for (let i = 0; i < 256; i++) HEX.push(i.toString(16).padStart(2, '0'));

  /** A classic hex dump: offset, 16 bytes in hex, the printable ASCII. */
  function hexDump(bytes, max) {
    const n = Math.min(bytes.length, max || bytes.length);
    const lines = [];
    for (let row = 0; row < n; row += 16) {
      let hex = '';
      let ascii = '';
      for (let i = 0; i < 16; i++) {
        const at = row + i;
        if (at < n) {
          const b = bytes[at];
          hex += HEX[b] + (i === 7 ? '  ' : ' ');
          ascii += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.';
        } else {
          hex += i === 7 ? '    ' : '   ';
        }
      }
      lines.push(row.toString(16).padStart(8, '0') + '  ' + hex + ' |' + ascii + '|');
    }
    return lines.join('\n');
  }

  /** Bytes from hex text ("de ad be ef", "deadbeef", "0xde 0xad"), or an error message. */
  function parseHex(text) {
    const cleaned = text.replace(/0x/gi, '').replace(/[\s,:]/g, '');
    if (!/^[0-9a-fA-F]*$/.test(cleaned)) return { error: 'only hex digits (0-9, a-f) and spaces' };
    if (cleaned.length % 2) return { error: 'an odd number of hex digits' };
    const bytes = new Uint8Array(cleaned.length / 2);
    for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(cleaned.substr(i * 2, 2), 16);
    return { bytes };
  }

  function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
      if (signal && signal.aborted) return reject(new DOMException('aborted', 'AbortError'));
      const timer = setTimeout(resolve, ms);
      if (signal) {
        signal.addEventListener(
          'abort',
          () => {
            clearTimeout(timer);
            reject(new DOMException('aborted', 'AbortError'));
          },
          { once: true }
        );
      }
    });
  }

  window.DS = window.DS || {};
  Object.assign(window.DS, {
    h, svg, clear, fmtNumber, fmtDecimal, fmtBytes, fmtDuration, fmtTime, fmtClock,
    fmtRelative, timeEl, truncate, hexDump, parseHex, sleep,
  });
})();
