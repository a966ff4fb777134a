// Faultline dashboard, Alerts panel: the alerts firing now (GET /v1/alerts?state=firing), with the
// reader's token, each with its summary and the answer that shows its figure. Every text goes in
// through textContent; nothing from the server is parsed as HTML.
'use strict';
window.FaultlineAlerts = (function () {
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  async function show(panel, token, cluster) {
    panel.textContent = '';
    if (!token) return;
    const q = new URLSearchParams({ state: 'firing', limit: '100' });
    if (cluster) q.set('cluster', cluster);
    let res;
    try {
      res = await fetch('/v1/alerts?' + q.toString(), { headers: { Authorization: 'Bearer ' + token } });
    } catch (e) {
      panel.appendChild(el('p', {}, 'Alerts: the server did not answer.'));
      return;
    }
    if (!res.ok) {
      panel.appendChild(el('p', {}, 'Alerts: HTTP ' + res.status));
      return;
    }
    const alerts = await res.json();
    panel.appendChild(el('h2', {}, 'Firing alerts (' + alerts.length + ')'));
    if (!alerts.length) {
      panel.appendChild(el('p', {}, 'No alert is firing.'));
      return;
    }
    const table = el('table', { id: 'alerts-table' });
    const head = el('tr');
    for (const h of ['Rule', 'Cluster', 'Subject', 'Since (UTC)', 'Summary', 'Figure']) head.appendChild(el('th', {}, h));
    table.appendChild(head);
    for (const a of alerts) {
      const tr = el('tr', { 'data-fingerprint': a.fingerprint });
      tr.appendChild(el('td', {}, a.rule_id));
      tr.appendChild(el('td', {}, a.cluster));
      tr.appendChild(el('td', {}, a.subject));
      tr.appendChild(el('td', {}, String(a.starts_at).replace('T', ' ').slice(0, 19)));
      tr.appendChild(el('td', {}, (a.annotations && a.annotations.summary) || ''));
      const td = el('td');
      const link = a.annotations && (a.annotations.answer || a.annotations.link);
      // Only links to this service's own API are followed.
      if (link && link.indexOf('/v1/') >= 0) td.appendChild(el('a', { href: link.slice(link.indexOf('/v1/')) }, 'answer'));
      tr.appendChild(td);
      table.appendChild(tr);
    }
    panel.appendChild(table);
  }

  return { show };
})();
