// Plots as SVG built with createElementNS (no style attributes: classes in console.css and
// presentation attributes only).
'use strict';

(function () {
  const { svg, h, fmtDecimal, fmtNumber, fmtClock } = window.DS;

  /** The smallest 1, 2 or 5 x 10^k at or above v. */
  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const k = Math.pow(10, Math.floor(Math.log10(v)));
    // Quarters of these read well on four grid lines.
    for (const m of [1, 2, 4, 6, 8, 10]) if (m * k >= v) return m * k;
    return 10 * k;
  }

  /**
   * A line over time with its area filled.
   * options: points ([[unix seconds, value per step]]), step (seconds a point covers), window
   * (seconds shown, ending now), now (unix seconds), unit ("appends/s"), format(v) for labels,
   * test (data-test of the svg).
   */
  function lineChart(options) {
    const W = 400;
    const H = 170;
    const left = 50;
    const right = 10;
    const top = 10;
    const bottom = 24;
    const plotW = W - left - right;
    const plotH = H - top - bottom;
    const step = options.step || 1;
    const now = options.now || Date.now() / 1000;
    const span = options.window || 900;
    const start = now - span;
    const format = options.format || fmtDecimal;
    const points = (options.points || [])
      .filter((p) => Array.isArray(p) && p.length >= 2 && p[0] >= start - step)
      .map((p) => [Number(p[0]), Number(p[1]) / step])
      .sort((a, b) => a[0] - b[0]);
    const max = niceCeil(points.reduce((m, p) => Math.max(m, p[1]), 0));
    const x = (t) => left + Math.max(0, Math.min(1, (t - start) / span)) * plotW;
    const y = (v) => top + plotH - (v / max) * plotH;

    const root = svg('svg', {
      class: 'plot',
      viewBox: '0 0 ' + W + ' ' + H,
      role: 'img',
      'aria-label': options.label || 'plot',
      test: options.test,
    });
    const grid = svg('g', { class: 'plot-grid' });
    for (let i = 0; i <= 4; i++) {
      const v = (max * i) / 4;
      const gy = y(v);
      grid.appendChild(svg('line', { x1: left, x2: W - right, y1: gy, y2: gy, class: i ? 'grid' : 'axis' }));
      grid.appendChild(
        svg('text', { x: left - 8, y: gy + 4, class: 'plot-label', 'text-anchor': 'end', text: format(v) })
      );
    }
    const ticks = 3;
    for (let i = 0; i <= ticks; i++) {
      const t = start + (span * i) / ticks;
      const gx = x(t);
      grid.appendChild(svg('line', { x1: gx, x2: gx, y1: top + plotH, y2: top + plotH + 4, class: 'axis' }));
      grid.appendChild(
        svg('text', {
          x: gx,
          y: H - 6,
          class: 'plot-label',
          'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle',
          text: i === ticks ? 'now' : fmtClock(new Date(t * 1000)).slice(0, 5),
        })
      );
    }
    root.appendChild(grid);

    if (!points.length) {
      root.appendChild(
        svg('text', { x: left + plotW / 2, y: top + plotH / 2, class: 'plot-empty', 'text-anchor': 'middle', text: 'no data yet' })
      );
      return root;
    }
    let line = '';
    for (const [t, v] of points) line += (line ? 'L' : 'M') + x(t).toFixed(1) + ',' + y(v).toFixed(1);
    const first = x(points[0][0]).toFixed(1);
    const last = x(points[points.length - 1][0]).toFixed(1);
    const base = y(0).toFixed(1);
    root.appendChild(svg('path', { class: 'plot-area', d: 'M' + first + ',' + base + line.replace(/^M/, 'L') + 'L' + last + ',' + base + 'Z' }));
    root.appendChild(svg('path', { class: 'plot-line', d: line }));
    // One invisible band per point, its value as a tooltip.
    const band = Math.max(2, (step / span) * plotW);
    const hover = svg('g', { class: 'plot-hover' });
    for (const [t, v] of points) {
      const r = svg('rect', { x: x(t) - band / 2, y: top, width: band, height: plotH });
      r.appendChild(svg('title', { text: fmtClock(new Date(t * 1000)) + '  ' + format(v) + ' ' + (options.unit || '') }));
      hover.appendChild(r);
    }
    root.appendChild(hover);
    const lastPoint = points[points.length - 1];
    root.appendChild(svg('circle', { class: 'plot-dot', cx: x(lastPoint[0]), cy: y(lastPoint[1]), r: 3 }));
    return root;
  }

  /** A horizontal bar of parts [{label, value, cls}] in proportion, with a legend. */
  function stackedBar(parts, options) {
    const opts = options || {};
    const total = parts.reduce((s, p) => s + Math.max(0, Number(p.value) || 0), 0);
    const W = 600;
    const H = 22;
    const bar = svg('svg', {
      class: 'stacked-bar',
      viewBox: '0 0 ' + W + ' ' + H,
      preserveAspectRatio: 'none',
      role: 'img',
      'aria-label': opts.label || 'bar',
      test: opts.test,
    });
    bar.appendChild(svg('rect', { x: 0, y: 0, width: W, height: H, rx: 4, class: 'bar-empty' }));
    let at = 0;
    for (const part of parts) {
      const v = Math.max(0, Number(part.value) || 0);
      if (!total || !v) continue;
      const w = (v / total) * W;
      const r = svg('rect', { x: at, y: 0, width: w, height: H, class: 'bar-part ' + part.cls });
      r.appendChild(svg('title', { text: part.label + ': ' + (opts.format || fmtNumber)(v) }));
      bar.appendChild(r);
      at += w;
    }
    const legend = h(
      'ul',
      { class: 'legend' },
      parts.map((part) =>
        h(
          'li',
          null,
          h('span', { class: 'swatch ' + part.cls }),
          h('span', { class: 'legend-label', text: part.label }),
          h('span', { class: 'legend-value', text: (opts.format || fmtNumber)(part.value || 0) }),
          total ? h('span', { class: 'legend-share', text: fmtDecimal((100 * (Number(part.value) || 0)) / total) + '%' }) : null
        )
      )
    );
    return h('div', { class: 'stacked' }, bar, legend);
  }

  /** A thin bar showing share (0..1) of a whole. */
  function shareBar(share, test) {
    const W = 200;
    const s = Math.max(0, Math.min(1, Number(share) || 0));
    const bar = svg('svg', { class: 'share-bar', viewBox: '0 0 ' + W + ' 8', preserveAspectRatio: 'none', test });
    bar.appendChild(svg('rect', { x: 0, y: 0, width: W, height: 8, rx: 4, class: 'bar-empty' }));
    if (s > 0) bar.appendChild(svg('rect', { x: 0, y: 0, width: s * W, height: 8, rx: 4, class: 'bar-fill' }));
    return bar;
  }

  window.DS = window.DS || {};
  Object.assign(window.DS, { lineChart, stackedBar, shareBar, niceCeil });
})();
