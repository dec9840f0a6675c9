// panels.js: the side panel's views, each drawn from one API reply:
// queues (GET /v1/queues), pending jobs with their explanation (GET
// /v1/jobs/{id}/explain: the same words and structure as `arbiter
// explain`), job detail (GET /v1/jobs/{id}), node detail (GET
// /v1/nodes/{name} and its /telemetry), and the event log (GET /v1/events).

import { esc, gpus, pct, fmtBytes, fmtRate, chart } from './util.js';
import { nodeLabel } from './map.js';

function q(o, k) {
  return o && o[k] != null ? o[k] : null;
}

// ---- queues -----------------------------------------------------------------------------

export function queuesHtml(queues) {
  if (!queues.length) return '<p class="muted">No queues yet.</p>';
  const wsum = queues.reduce((a, x) => a + (x.weight || 0), 0);
  let h = '<table class="grid"><thead><tr><th>queue</th><th>cohort</th><th title="nominal GPU quota (and the most it may borrow above it)">quota</th><th title="GPUs in use">used</th>' +
    '<th title="GPUs used above the quota, lent by the cohort">borrowed</th>' +
    '<th title="weight over the weights of all queues">fair</th><th title="dominant resource share">share</th><th>pending</th><th>running</th></tr></thead><tbody>';
  for (const x of queues) {
    const used = q(x.used, 'nvidia.com/gpu') || 0;
    const nom = x.nominal ? q(x.nominal, 'nvidia.com/gpu') : null;
    const lim = x.borrowing_limit ? q(x.borrowing_limit, 'nvidia.com/gpu') : null;
    const borrowed = nom != null && used > nom ? used - nom : 0;
    h += `<tr data-queue="${esc(x.name)}"><td>${esc(x.name)}</td><td>${esc(x.cohort || '-')}</td><td>${nom == null ? '-' : gpus(nom)}${lim ? ' (+' + gpus(lim) + ')' : ''}</td>` +
      `<td>${gpus(used)}</td><td${borrowed > 0 ? ' class="warn"' : ''}>${gpus(borrowed)}</td>` +
      `<td>${wsum > 0 ? (x.weight / wsum).toFixed(2) : '-'}</td><td>${(x.dominant_share || 0).toFixed(2)}</td>` +
      `<td>${x.pending}</td><td>${x.running}</td></tr>`;
  }
  return h + '</tbody></table>';
}

// ---- pending jobs and why ---------------------------------------------------------------

// The text `arbiter explain ID` prints, line for line (src/cli/client.c).
export function explainText(x) {
  let t = `job ${x.job} '${x.name}' is ${x.state}\n  ${x.summary}\n`;
  for (const s of x.stragglers || []) t += `  straggler: task ${s.task} on node ${s.node} (${s.reason})\n`;
  if (x.hint) t += `  hint: ${x.hint}\n`;
  if (x.message) t += `  last: ${x.message}\n`;
  return t;
}

function explainStructure(x) {
  const e = x.explain;
  if (!e) return '';
  let h = '';
  const reasons = Object.entries(e.reasons || {}).sort((a, b) => b[1] - a[1]);
  if (reasons.length) {
    h += '<table class="grid reasons"><thead><tr><th>nodes rejected because</th><th>nodes</th></tr></thead><tbody>';
    for (const [r, n] of reasons) h += `<tr><td>${esc(r)}</td><td>${n}</td></tr>`;
    h += `</tbody></table>`;
  }
  const f = e.fragmentation;
  if (f && f.need_gpus > 0) {
    const fragmented = f.largest_free < f.need_gpus && f.free_gpus >= f.need_gpus;
    h += `<p class="frag${fragmented ? ' warn' : ''}">Fragmentation: ${gpus(f.free_gpus)} GPU(s) free in the cluster; it needs ${f.need_gpus} in one ${esc(f.domain)}; ` +
      `the largest free block is ${f.largest_free}${fragmented ? ': the free GPUs are fragmented' : ''}.</p>`;
  }
  const what = [];
  if (e.best_node) what.push(`nearest node: <a href="#node=${encodeURIComponent(e.best_node)}">${esc(e.best_node)}</a>`);
  if (e.quota_blocked) what.push('held by its queue\'s quota');
  if (e.preemption_helps) what.push('preemption would fit it');
  if (what.length) h += `<p class="fit">What would fit: ${what.join('; ')}.</p>`;
  return h;
}

export function pendingHtml(jobs, explains) {
  if (!jobs.length) return '<p class="muted">No job is pending.</p>';
  let h = '';
  for (const j of jobs) {
    const x = explains.get(j.id);
    h += `<div class="pjob" data-job-id="${j.id}"><div class="ph"><a href="#job=${j.id}">#${j.id} ${esc(j.name)}</a> <span class="muted">${esc(j.queue)} · ${j.gpus} GPU(s) · priority ${j.priority}${j.state !== 'pending' ? ' · ' + esc(j.state) : ''}</span></div>`;
    if (!x) {
      h += '<p class="muted">explaining…</p></div>';
      continue;
    }
    h += `<pre class="explain">${esc(explainText(x))}</pre>${explainStructure(x)}`;
    h += `<div class="acts"><button data-act="fit" data-job="${j.id}" title="highlight the nodes where one of its tasks fits now">Nodes it could use</button>`;
    if (x.explain && x.explain.best_node) h += ` <button data-act="free" data-job="${j.id}" title="mark the GPUs to free on the nearest node">GPUs to free</button>`;
    h += '</div></div>';
  }
  return h;
}

// ---- job detail ---------------------------------------------------------------------------

function kv(rows) {
  return '<table class="kv">' + rows.filter((r) => r[1] != null && r[1] !== '').map(([k, v]) => `<tr><th>${esc(k)}</th><td>${v}</td></tr>`).join('') + '</table>';
}

function nodeLink(name) {
  return name ? `<a href="#node=${encodeURIComponent(name)}">${esc(name)}</a>` : '-';
}

// Tasks whose log exists (they have run somewhere).
export function loggableTasks(j) {
  return (j.tasks || []).filter((t) => (t.node || t.last_node) && ['running', 'succeeded', 'failed', 'cancelled', 'lost'].includes(t.state));
}

export function jobHtml(j) {
  let h = `<h3>job ${j.id} '${esc(j.name)}' <span class="state s-${esc(j.state)}">${esc(j.state)}</span>${j.stop_requested ? ' <span class="warn">stop requested</span>' : ''}</h3>`;
  h += kv([
    ['queue', `${esc(j.queue)} (team ${esc(j.team)}, owner ${esc(j.owner)})`],
    ['priority', esc(j.priority)],
    ['GPUs', esc(j.gpus)],
    ['version', `${j.version} (Lamport ${j.updated_lamport})`],
    ['submitted', esc(j.submitted_at)],
    ['started', j.started_at ? esc(j.started_at) : null],
    ['ended', j.ended_at ? esc(j.ended_at) : null],
    ['message', j.message ? esc(j.message) : null],
    ['elastic', j.elastic ? `${j.elastic.current} tasks now, min ${j.elastic.min}, max ${j.elastic.max}` : null],
    ['command', j.command && j.command.length ? `<code>${esc(j.command.join(' '))}</code>` : null],
  ]);
  h += '<h4>Tasks</h4><table class="grid"><thead><tr><th>#</th><th>group</th><th>state</th><th>node</th><th>GPUs</th><th>exit</th></tr></thead><tbody>';
  for (const t of j.tasks || []) {
    const where = t.node ? nodeLink(t.node) : t.last_node ? nodeLink(t.last_node) + ' (ran)' : '-';
    h += `<tr data-task="${t.index}"><td>${t.index}</td><td>${esc(t.group)}</td><td>${esc(t.state)}${t.straggler ? ' <span class="warn">straggler</span>' : ''}</td>` +
      `<td>${where}</td><td>${(t.gpus || []).join(',') || '-'}</td><td>${t.exit_code == null ? '' : esc(t.exit_code)}</td></tr>`;
  }
  h += '</tbody></table>';
  const evs = (j.events || []).slice().sort((a, b) => a.lamport - b.lamport);
  const hist = evs.filter((e) => e.type && e.type.startsWith('job-'));
  h += '<h4>State history</h4>';
  h += hist.length ? '<ol class="history">' + hist.map((e) => `<li><span class="lam">${e.lamport}</span> ${esc(e.type.slice(4))} <span class="muted">${esc(e.time)}</span></li>`).join('') + '</ol>' : '<p class="muted">none kept</p>';
  h += '<h4>Events <span class="muted">(Lamport order)</span></h4><table class="grid events"><thead><tr><th>lamport</th><th>type</th><th>message</th></tr></thead><tbody>';
  for (const e of evs) h += `<tr><td class="lam">${e.lamport}</td><td>${esc(e.type)}</td><td>${esc(e.message)}</td></tr>`;
  h += '</tbody></table>';
  const lt = loggableTasks(j);
  h += '<h4>Log tail</h4>';
  if (lt.length) {
    h += `<div class="acts">task <select id="log-task">${lt.map((t) => `<option value="${t.index}">${t.index}</option>`).join('')}</select> ` +
      `<select id="log-stream"><option value="out">output (stdout and stderr)</option><option value="err">stderr (an agent with --stderr separate)</option></select> <button data-act="log">refresh</button> <span id="log-info" class="muted"></span></div><pre id="log" class="log"></pre>`;
  } else {
    h += '<p class="muted">No task has run yet.</p>';
  }
  return h;
}

// ---- node detail --------------------------------------------------------------------------

export function nodeHtml(n, jobs) {
  const inv = n.inventory || {};
  const label = nodeLabel(n);
  let h = `<h3>node ${esc(n.name)} <span class="state st-${esc(label)}">${esc(label)}</span></h3>`;
  h += kv([
    ['capacity', `${n.capacity.gpus} GPUs, ${esc(n.capacity.cpu)} CPU, ${esc(n.capacity.memory)}`],
    ['allocated', `${gpus(n.allocated.gpus)} GPUs, ${esc(n.allocated.cpu)} CPU, ${esc(n.allocated.memory)}`],
    ['tasks', esc(n.tasks)],
    ['last report', n.last_report ? `${esc(n.last_report)} (${n.report_age_s.toFixed(1)} s ago, Lamport ${n.report_lamport})` : 'never'],
    ['hostname', inv.hostname ? esc(inv.hostname) : null],
    ['version', esc(n.version)],
  ]);
  const labels = Object.entries(n.labels || {});
  h += '<h4>Labels</h4>' + (labels.length ? '<table class="grid">' + labels.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join('') + '</table>' : '<p class="muted">none</p>');
  const taints = inv.taints || [];
  h += '<h4>Taints</h4>' + (taints.length ? '<table class="grid"><thead><tr><th>key</th><th>value</th><th>effect</th></tr></thead>' + taints.map((t) => `<tr><td>${esc(t.key)}</td><td>${esc(t.value || '')}</td><td>${esc(t.effect)}</td></tr>`).join('') + '</table>' : '<p class="muted">none</p>');
  h += '<h4>Topology</h4><table class="grid"><thead><tr><th>GPU</th><th>model</th><th>memory</th><th>NVLink</th><th>PCIe</th><th>NUMA</th><th>util</th><th>temp</th><th>health</th><th>jobs</th></tr></thead><tbody>';
  for (const g of n.gpus || []) {
    const js = (g.jobs || []).map((id) => `<a href="#job=${id}">${id}${jobs.has(id) ? ' ' + esc(jobs.get(id).name) : ''}</a>`).join(', ');
    h += `<tr><td>${g.index}</td><td>${esc(g.model)}</td><td>${fmtBytes(g.memory_mib * 1048576)}</td><td>${g.nvlink < 0 ? '-' : g.nvlink}</td><td>${g.pcie < 0 ? '-' : g.pcie}</td><td>${g.numa < 0 ? '-' : g.numa}</td>` +
      `<td>${g.util}%</td><td>${g.temp_c}°C</td><td>${g.healthy ? 'ok' : '<span class="warn">unhealthy</span>'}</td><td>${js || '-'}</td></tr>`;
  }
  h += '</tbody></table>';
  h += '<h4>Telemetry <span class="muted" id="tel-span"></span></h4><div id="charts" class="charts"></div>';
  return h;
}

function series(samples, f) {
  return samples.map((s) => {
    const v = f(s);
    return v == null ? null : v;
  });
}

function last(vals) {
  for (let i = vals.length - 1; i >= 0; i--) if (vals[i] != null) return vals[i];
  return null;
}

// Small charts of GET /v1/nodes/{name}/telemetry into el.
export function drawCharts(el, tel, node) {
  el.textContent = '';
  const s = tel.samples || [];
  const span = document.getElementById('tel-span');
  if (span) span.textContent = s.length ? `(${s.length} samples, one per ${tel.interval_s} s, the last ${Math.round(s[0].age_s)} s)` : '(no samples yet)';
  const add = (title, now, svg) => {
    const d = document.createElement('div');
    d.className = 'chartbox';
    const t = document.createElement('div');
    t.className = 'ct';
    t.textContent = `${title}: ${now}`;
    d.append(t, svg);
    el.appendChild(d);
  };
  const cpu = series(s, (x) => x.cpu_util);
  add('CPU', pct(last(cpu)), chart([{ values: cpu, cls: 'a' }], 1, 'CPU utilisation'));
  const mem = series(s, (x) => x.memory_used_bytes);
  add('memory used', fmtBytes(last(mem)), chart([{ values: mem, cls: 'a' }], null, 'memory used'));
  const rx = series(s, (x) => x.net_rx_bps), tx = series(s, (x) => x.net_tx_bps);
  add('network rx / tx', `${fmtRate(last(rx))} / ${fmtRate(last(tx))}`, chart([{ values: rx, cls: 'a' }, { values: tx, cls: 'b' }], null, 'network'));
  const dr = series(s, (x) => x.disk_read_bps), dw = series(s, (x) => x.disk_write_bps);
  add('disk read / write', `${fmtRate(last(dr))} / ${fmtRate(last(dw))}`, chart([{ values: dr, cls: 'a' }, { values: dw, cls: 'b' }], null, 'disk'));
  for (const g of node.gpus || []) {
    const u = series(s, (x) => (x.gpus[g.index] ? x.gpus[g.index].util : null));
    const t = series(s, (x) => (x.gpus[g.index] ? x.gpus[g.index].temp_c : null));
    const lu = last(u), lt = last(t);
    add(`GPU ${g.index} util / temp`, `${lu == null ? '-' : lu + '%'} / ${lt == null ? '-' : lt + '°C'}`,
      chart([{ values: u, cls: 'a' }, { values: t, cls: 'b' }], 100, `GPU ${g.index} utilisation and temperature`));
  }
}

// ---- events ---------------------------------------------------------------------------------

export function eventsHtml(evs) {
  if (!evs.length) return '<p class="muted">No event since the page opened.</p>';
  let h = '<table class="grid events"><thead><tr><th>lamport</th><th>type</th><th>message</th></tr></thead><tbody>';
  for (let i = evs.length - 1; i >= 0; i--) {
    const e = evs[i];
    const link = e.job ? `<a href="#job=${e.job}">${esc(e.message)}</a>` : e.node ? `<a href="#node=${encodeURIComponent(e.node)}">${esc(e.message)}</a>` : esc(e.message);
    h += `<tr><td class="lam">${e.lamport}</td><td>${esc(e.type)}</td><td>${link}</td></tr>`;
  }
  return h + '</tbody></table>';
}
