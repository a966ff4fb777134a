// Faultline dashboard: asks the API for the report fragment (server-rendered, escaped HTML with
// inline SVG) with the reader's token and shows it. The token stays in this browser's localStorage;
// `/#token=...&from=YYYY-MM-DD&to=YYYY-MM-DD&cluster=...&job_gpus=N` pre-fills it (the fragment never reaches
// the server) and is then removed from the address bar.
'use strict';
(function () {
  const TOKEN_KEY = 'faultline.token';
  const $ = (id) => document.getElementById(id);
  const DAY = 86400000;

  function isoDay(d) {
    return d.toISOString().slice(0, 10);
  }

  function status(text, isError) {
    const el = $('status');
    el.textContent = text;
    el.className = isError ? 'error' : '';
  }

  function readFragment() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ''));
    if (params.get('token')) {
      localStorage.setItem(TOKEN_KEY, params.get('token'));
      params.delete('token');
    }
    for (const name of ['from', 'to']) {
      if (/^\d{4}-\d{2}-\d{2}$/.test(params.get(name) || '')) $(name).value = params.get(name);
    }
    if (params.get('cluster')) setCluster(params.get('cluster'));
    if (/^\d{1,7}$/.test(params.get('job_gpus') || '')) $('job-gpus').value = params.get('job_gpus');
    writeFragment();
  }

  // Keeps the view shareable (window and cluster, never the token).
  function writeFragment() {
    const params = new URLSearchParams({ from: $('from').value, to: $('to').value });
    if ($('cluster').value) params.set('cluster', $('cluster').value);
    if ($('job-gpus').value) params.set('job_gpus', $('job-gpus').value);
    history.replaceState(null, '', location.pathname + location.search + '#' + params.toString());
  }

  function setCluster(name) {
    const select = $('cluster');
    if (![...select.options].some((o) => o.value === name)) select.add(new Option(name, name));
    select.value = name;
  }

  // The window as RFC 3339: the picked end day is included, so it ends at the next midnight (UTC).
  function windowBounds() {
    const toDay = new Date($('to').value + 'T00:00:00Z');
    return [$('from').value + 'T00:00:00Z', isoDay(new Date(toDay.getTime() + DAY)) + 'T00:00:00Z'];
  }

  function query(format) {
    const [from, to] = windowBounds();
    const params = new URLSearchParams({ format: format, from: from, to: to });
    if ($('cluster').value) params.set('cluster', $('cluster').value);
    // The fleet-health section's job-plan card.
    if ($('job-gpus').value) params.set('job_gpus', $('job-gpus').value);
    return '/v1/reports/reliability?' + params.toString();
  }

  async function fetchReport(format) {
    const token = localStorage.getItem(TOKEN_KEY);
    if (!token) {
      status('Paste a reader token to see the report.', false);
      return null;
    }
    let res;
    try {
      res = await fetch(query(format), { headers: { Authorization: 'Bearer ' + token } });
    } catch (e) {
      status('The server did not answer: ' + e.message, true);
      return null;
    }
    if (!res.ok) {
      let message = 'HTTP ' + res.status;
      try {
        message += ': ' + (await res.json()).message;
      } catch (_) {
        // not a JSON error body
      }
      status(message, true);
      return null;
    }
    return res.text();
  }

  async function show() {
    if (!$('from').value || !$('to').value) return;
    writeFragment();
    status('Loading…', false);
    const html = await fetchReport('fragment');
    if (html === null) return;
    // The server escapes every text it puts in the fragment.
    $('report').innerHTML = html;
    const article = $('report').querySelector('article');
    const clusters = article && article.dataset.clusters ? article.dataset.clusters.split(',') : [];
    const current = $('cluster').value;
    for (const c of clusters) if (c) setCluster(c);
    $('cluster').value = current;
    status('', false);
    // The firing alerts, the fleet now, then the Parts panel from the parts analytics (the report's own Parts
    // section is hidden here).
    await window.FaultlineAlerts.show($('alerts-panel'), localStorage.getItem(TOKEN_KEY), current);
    await window.FaultlineFleet.show($('fleet-panel'), localStorage.getItem(TOKEN_KEY), current);
    const [from, to] = windowBounds();
    await window.FaultlineParts.show($('parts-panel'), localStorage.getItem(TOKEN_KEY), current, from, to);
  }

  async function download(format, extension, type) {
    const body = await fetchReport(format);
    if (body === null) return;
    const url = URL.createObjectURL(new Blob([body], { type: type }));
    const a = document.createElement('a');
    a.href = url;
    a.download = 'reliability-report-' + $('from').value + '-' + $('to').value + '.' + extension;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  const now = new Date();
  $('to').value = isoDay(now);
  // 30 days including today: the API's default window (now - 30 days to now), in whole UTC days.
  $('from').value = isoDay(new Date(now.getTime() - 29 * DAY));
  readFragment();
  if (localStorage.getItem(TOKEN_KEY)) $('token').placeholder = 'token stored in this browser';

  $('token').addEventListener('change', () => {
    const t = $('token').value.trim();
    if (t) {
      localStorage.setItem(TOKEN_KEY, t);
      $('token').value = '';
      $('token').placeholder = 'token stored in this browser';
      show();
    }
  });
  $('forget').addEventListener('click', () => {
    localStorage.removeItem(TOKEN_KEY);
    $('token').placeholder = 'paste a reader token once';
    $('report').textContent = '';
    $('parts-panel').textContent = '';
    $('alerts-panel').textContent = '';
    $('fleet-panel').textContent = '';
    status('Token forgotten.', false);
  });
  $('controls').addEventListener('submit', (e) => {
    e.preventDefault();
    show();
  });
  $('cluster').addEventListener('change', show);
  $('download-html').addEventListener('click', () => download('html', 'html', 'text/html'));
  $('download-markdown').addEventListener('click', () => download('markdown', 'md', 'text/markdown'));
  show();
})();
