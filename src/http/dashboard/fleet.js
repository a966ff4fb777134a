// Faultline dashboard, Fleet now panel: the GPUs out of service now by state and cause, and the
// oldest open repairs (GET /v1/fleet/now), with the reader's token. Every text goes in through
// textContent; nothing from the server is parsed as HTML.
'use strict';
window.FaultlineFleet = (function () {
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function table(id, headers, rows) {
    const t = el('table', { id: id });
    const head = el('tr');
    for (const h of headers) head.appendChild(el('th', {}, h));
    t.appendChild(head);
    for (const r of rows) {
      const tr = el('tr');
      for (const v of r) tr.appendChild(el('td', {}, v === null || v === undefined ? '' : String(v)));
      t.appendChild(tr);
    }
    return t;
  }

  async function show(panel, token, cluster) {
    panel.textContent = '';
    if (!token) return;
    const q = new URLSearchParams({ limit: '10' });
    if (cluster) q.set('cluster', cluster);
    let res;
    try {
      res = await fetch('/v1/fleet/now?' + q.toString(), { headers: { Authorization: 'Bearer ' + token } });
    } catch (e) {
      panel.appendChild(el('p', {}, 'Fleet now: the server did not answer.'));
      return;
    }
    if (!res.ok) {
      panel.appendChild(el('p', {}, 'Fleet now: HTTP ' + res.status));
      return;
    }
    const f = await res.json();
    panel.appendChild(el('h2', {}, 'Fleet now: ' + f.out_of_service_gpus + ' of ' + f.installed_gpus + ' GPUs out of service'));
    panel.appendChild(table('fleet-states', ['State', 'Nodes', 'GPUs out'],
      f.by_state.map((s) => [s.state, s.nodes, s.gpus])));
    if (f.by_cause.length) {
      panel.appendChild(table('fleet-causes', ['State', 'Category', 'Component', 'GPUs out'],
        f.by_cause.map((c) => [c.state, c.category, c.component, c.gpus])));
    }
    panel.appendChild(el('h3', {}, 'Oldest open repairs'));
    if (!f.oldest_repairs.length) {
      panel.appendChild(el('p', {}, 'No GPU is waiting for repair.'));
      return;
    }
    panel.appendChild(table('fleet-repairs', ['Node', 'GPU', 'Part', 'Reason', 'Ticket', 'Removed (UTC)', 'Hours', 'Cause'],
      f.oldest_repairs.map((r) => [r.cluster + '/' + r.hostname, r.gpu_index, r.part, r.reason, r.ticket,
        String(r.removed_at).replace('T', ' ').slice(0, 19), r.age_hours.toFixed(1),
        r.cause ? r.cause.category + '/' + r.cause.component : ''])));
  }

  return { show };
})();
