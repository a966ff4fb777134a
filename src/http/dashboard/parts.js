// Faultline dashboard, Parts panel: survival curves (steps with their bands and the numbers at
// risk), failures per part-year by model, the parts or slots with repeat hard failures and the
// strongest precursors, and the next quarter's expected failures by model with the backtest of the
// forecast, fetched from /v1/analytics/{survival,afr,parts-or-slots,precursors,failure-forecast}
// with the reader's token. Every text goes in through textContent; nothing from the server is parsed
// as HTML.
'use strict';
window.FaultlineParts = (function () {
  const SVG = 'http://www.w3.org/2000/svg';
  // Okabe-Ito, as the report's curves.
  const COLORS = ['#0072B2', '#D55E00', '#009E73', '#E69F00', '#CC79A7', '#56B4E9', '#000000'];
  const YEAR = 365.25;
  const LIST = 10;
  const PRECURSORS = 5;

  function el(tag, attrs, text) {
    const e = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  const num = (v, places) =>
    v === null || v === undefined ? 'n/a' : Number(v).toLocaleString('en-US', { minimumFractionDigits: places, maximumFractionDigits: places });
  const interval = (lo, hi) => (lo === null || lo === undefined ? 'n/a' : num(lo, 2) + ' to ' + (hi === null || hi === undefined ? 'unbounded' : num(hi, 2)));
  const pText = (p) => (p === null || p === undefined ? 'n/a' : p < 0.001 ? 'p < 0.001' : 'p = ' + p.toFixed(3));

  // (top, step) with steps of 1, 2 or 5 x 10^k and at most six intervals, as the report's axes.
  function niceAxis(max) {
    if (!(max > 0 && isFinite(max))) return [1, 0.2];
    const raw = max / 6;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw * (1 - 1e-9));
    return [Math.max(1, Math.ceil(max / step - 1e-9)) * step, step];
  }

  function ageAxis(maxDays) {
    const years = maxDays >= 2 * YEAR;
    const unit = years ? YEAR : 1;
    const [top, step] = niceAxis(maxDays / unit);
    const ticks = [];
    for (let i = 0; i <= Math.round(top / step); i++) ticks.push(i * step * unit);
    return { max: top * unit, ticks, years, label: (d) => String(Math.round((years ? d / YEAR : d) * 1000) / 1000) };
  }

  // Subjects at risk at t: the first step at or after t (0 beyond the last), as the API's at_risk.
  function atRisk(steps, t) {
    const st = steps.find((s) => s.time >= t);
    return st ? st.at_risk : 0;
  }

  // The step line and the band, in chart coordinates: the same paths as the report draws.
  function stepPaths(steps, x, y) {
    const f = (v) => v.toFixed(1);
    let line = 'M' + f(x(0)) + ' ' + f(y(1));
    let band = line;
    for (const st of steps) {
      line += ' H' + f(x(st.time)) + ' V' + f(y(st.survival));
      band += ' H' + f(x(st.time)) + ' V' + f(y(st.upper));
    }
    if (steps.length) band += ' V' + f(y(steps[steps.length - 1].lower));
    for (let i = steps.length - 1; i >= 0; i--) {
      band += ' V' + f(y(i ? steps[i - 1].lower : 1)) + ' H' + f(x(i ? steps[i - 1].time : 0));
    }
    return [line, band + ' Z'];
  }

  function survivalChart(answer) {
    const groups = answer.groups.filter((g) => g.curve.steps.length);
    const maxDays = Math.max(0, ...groups.map((g) => g.curve.steps[g.curve.steps.length - 1].time));
    const axis = ageAxis(maxDays);
    const [W, left, right, top, plotH] = [760, 110, 16, 62, 220];
    const plotW = W - left - right;
    const base = top + plotH;
    const riskTop = base + 62;
    const H = riskTop + 18 * groups.length + 10;
    const x = (t) => left + (Math.min(Math.max(t, 0), axis.max) / axis.max) * plotW;
    const y = (s) => base - Math.min(Math.max(s, 0), 1) * plotH;
    const title = 'Survival of GPU parts by generation';
    const svg = el('svg:svg', { class: 'chart', 'data-chart': 'parts-survival', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': title, 'font-size': '12' });
    svg.appendChild(el('svg:title', {}, title));
    svg.appendChild(el('svg:text', { x: 8, y: 20, 'font-size': 15, 'font-weight': 600 }, title));
    let lx = 8;
    groups.forEach((g, i) => {
      svg.appendChild(el('svg:rect', { x: lx, y: 34, width: 12, height: 12, fill: COLORS[i % COLORS.length] }));
      svg.appendChild(el('svg:text', { x: lx + 16, y: 44 }, g.group));
      lx += 16 + g.group.length * 7 + 18;
    });
    for (let v = 0; v <= 1.0001; v += 0.2) {
      svg.appendChild(el('svg:line', { x1: left, x2: left + plotW, y1: y(v), y2: y(v), stroke: v === 0 ? '#555' : '#e3e3e3' }));
      svg.appendChild(el('svg:text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, String(Math.round(v * 10) / 10)));
    }
    const yTitle = 'share of parts not yet removed for failure';
    svg.appendChild(el('svg:text', { x: 16, y: top + plotH / 2, 'text-anchor': 'middle', transform: `rotate(-90 16 ${top + plotH / 2})` }, yTitle));
    for (const t of axis.ticks) {
      svg.appendChild(el('svg:line', { x1: x(t), x2: x(t), y1: base, y2: base + 4, stroke: '#555' }));
      svg.appendChild(el('svg:text', { x: x(t), y: base + 17, 'text-anchor': 'middle' }, axis.label(t)));
    }
    svg.appendChild(el('svg:text', { x: left + plotW / 2, y: base + 34, 'text-anchor': 'middle' }, 'installed age (' + (axis.years ? 'years' : 'days') + ')'));
    svg.appendChild(el('svg:text', { x: 8, y: riskTop - 4, 'font-weight': 600 }, 'Number at risk'));
    groups.forEach((g, i) => {
      const color = COLORS[i % COLORS.length];
      const [line, band] = stepPaths(g.curve.steps, x, y);
      const curve = el('svg:g', { class: 'curve' });
      const median = g.median_days === null ? 'not reached' : num(g.median_days, 1) + ' days';
      curve.appendChild(el('svg:title', {}, `${g.group}: ${g.parts} parts, ${g.events} failure removals, median ${median}`));
      curve.appendChild(el('svg:path', { class: 'band', d: band, fill: color, 'fill-opacity': 0.18, stroke: 'none' }));
      curve.appendChild(el('svg:path', { class: 'step', d: line, fill: 'none', stroke: color, 'stroke-width': 2 }));
      svg.appendChild(curve);
      const ty = riskTop + 14 + 18 * i;
      svg.appendChild(el('svg:text', { x: 8, y: ty, fill: color, 'font-weight': 600 }, g.group.slice(0, 16)));
      for (const t of axis.ticks) {
        svg.appendChild(el('svg:text', { class: 'at-risk-count', x: x(t), y: ty, 'text-anchor': 'middle' }, String(atRisk(g.curve.steps, t))));
      }
    });
    return svg;
  }

  function table(caption, headers, rows) {
    const t = el('table');
    t.appendChild(el('caption', {}, caption));
    const head = t.appendChild(el('thead')).appendChild(el('tr'));
    for (const h of headers) head.appendChild(el('th', { scope: 'col' }, h));
    const body = t.appendChild(el('tbody'));
    for (const r of rows) {
      const tr = body.appendChild(el('tr'));
      for (const c of r) tr.appendChild(el('td', {}, c));
    }
    return t;
  }

  function render(panel, survival, afr, suspects, precursors, forecast) {
    panel.replaceChildren(el('h2', {}, 'Parts'));
    if (!survival.groups.some((g) => g.parts > 0)) {
      panel.appendChild(el('p', { class: 'lead' }, 'No GPU parts are recorded for this fleet.'));
      return;
    }
    const medians = survival.groups.filter((g) => g.median_days !== null).map((g) => g.group + ' ' + num(g.median_days, 1) + ' days');
    let lead = medians.length ? 'Median installed age at a failure removal: ' + medians.join(', ') : 'No generation has lost half its parts to failure removals yet';
    if (survival.log_rank) lead += '; log-rank across generations ' + pText(survival.log_rank.p_value);
    panel.appendChild(el('p', { class: 'lead' }, lead + '.'));
    panel.appendChild(survivalChart(survival));
    panel.appendChild(
      table('Failures per part-year by model', ['Model', 'Parts', 'Failure removals', 'Part-years', 'Per part-year', 'Interval'],
        afr.groups.map((g) => [g.group, num(g.parts, 0), num(g.failures, 0), num(g.part_years, 2), num(g.rate_per_year, 2),
          g.rate_per_year === null ? 'n/a' : interval(g.lower, g.upper)])));
    const listed = suspects.parts.slice(0, LIST).concat(suspects.slots.slice(0, LIST));
    panel.appendChild(
      listed.length
        ? table('Parts or slots with repeat hard failures', ['Kind', 'Part or slot', 'Failures', 'Distinct slots or parts', 'Adjusted p', 'Recommendation'],
          listed.map((s) => [s.kind, s.id, num(s.failures, 0), num(s.distinct, 0), pText(s.adjusted_p), s.recommendation]))
        : el('p', { class: 'note' }, 'No part or slot had two or more hard failures.'));
    const strongest = precursors.precursors.slice(0, PRECURSORS);
    panel.appendChild(
      strongest.length
        ? table('Strongest precursors of a hard failure', ['Signal', 'Occurrences', 'Failures after it', 'Rate ratio', 'Interval', 'p'],
          strongest.map((p) => [p.kind + (p.code === null ? '' : ' ' + p.code), num(p.occurrences, 0), num(p.exposed_failures, 0),
            num(p.rate_ratio, 2), interval(p.ratio_lower, p.ratio_upper), pText(p.p_value)]))
        : el('p', { class: 'note' }, 'No signal named a part in this window.'));
    const next = forecast.groups.filter((g) => g.parts_in_service > 0);
    panel.appendChild(
      next.length
        ? table('Expected failures next quarter by model', ['Model', 'Parts in service', 'Expected', 'Interval', 'Spares', 'Method'],
          next.map((g) => [g.group, num(g.parts_in_service, 0), num(g.expected, 1), g.lower + ' to ' + g.upper, num(g.spares, 0), g.method]))
        : el('p', { class: 'note' }, 'No part is in service to forecast.'));
    const cell = (o, m) => {
      const f = o.forecasts.find((x) => x.method === m);
      return f ? num(f.expected, 1) : 'n/a';
    };
    const rows = forecast.groups.flatMap((g) => (g.backtest || []).map((o) =>
      [g.group, o.origin.slice(0, 10), num(o.actual, 0), cell(o, 'naive'), cell(o, 'afr'), cell(o, 'weibull')]));
    if (rows.length) panel.appendChild(table('Forecast backtest by model', ['Model', 'Origin', 'Failed', 'Naive', 'AFR', 'Weibull'], rows));
  }

  // Fetches the five answers for the cluster (and the window, for precursors) and draws the panel.
  async function show(panel, token, cluster, from, to) {
    const q = (path, params) => {
      const p = new URLSearchParams(params);
      if (cluster) p.set('cluster', cluster);
      return '/v1/analytics/' + path + '?' + p.toString();
    };
    const get = async (url) => {
      const res = await fetch(url, { headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' } });
      if (!res.ok) throw new Error(url.split('?')[0] + ': HTTP ' + res.status);
      return res.json();
    };
    try {
      const answers = await Promise.all([
        get(q('survival', { by: 'generation' })),
        get(q('afr', { by: 'model' })),
        get(q('parts-or-slots', {})),
        get(q('precursors', { from: from, to: to })),
        get(q('failure-forecast', { by: 'model', backtest: 'true' })),
      ]);
      render(panel, ...answers);
    } catch (e) {
      panel.replaceChildren(el('h2', {}, 'Parts'), el('p', { class: 'error' }, 'Parts analytics unavailable: ' + e.message));
    }
  }

  return { show, stepPaths, ageAxis };
})();
