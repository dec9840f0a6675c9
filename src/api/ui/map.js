// map.js: the GPU map. Every node is a box, every GPU a cell, grouped by
// NVLink domain and, inside it, by PCIe switch; a cell is coloured by the
// job (or queue) holding it, shaded by its utilisation (paler is idler),
// striped when unhealthy, split when shared. Each cell carries data-node,
// data-gpu and, when allocated, data-job (job ids, space-separated for a
// shared GPU), so tests and scripts can read the map.
//
// Drawing: the whole map is one HTML string the first time (the fastest
// way to make 10,000 elements); afterwards only the nodes whose content
// changed are replaced, found by a signature of what they show. Search,
// highlights and the selection are classes set on the existing elements
// (decorate), and report ages are text updated once a second (tickAges).

import { esc, jobColour, queueColour, fmtBytes } from './util.js';

const PALETTE = 20;

// The label a node shows: its state, or Lost once the controller declared
// it lost (silent past lease + grace).
export function nodeLabel(n) {
  return n.lost ? 'Lost' : n.state;
}

function colourOf(jobId, view) {
  if (view.colourBy === 'queue') {
    const j = view.jobs.get(jobId);
    return j ? queueColour(j.queue, PALETTE) : 'cq';
  }
  return jobColour(jobId, PALETTE);
}

function jobText(id, view) {
  const j = view.jobs.get(id);
  return j ? `job ${id} '${j.name}' (${j.queue})` : `job ${id}`;
}

function cellTitle(n, g, view) {
  const parts = [`${n.name} GPU ${g.index}`, g.model];
  if (g.memory_mib) parts.push(fmtBytes(g.memory_mib * 1048576));
  parts.push(`NVLink ${g.nvlink < 0 ? '-' : g.nvlink}`, `PCIe ${g.pcie < 0 ? '-' : g.pcie}`, `NUMA ${g.numa < 0 ? '-' : g.numa}`);
  parts.push(`util ${g.util}%`, `${g.temp_c}°C`);
  if (!g.healthy) parts.push('UNHEALTHY');
  const jobs = g.jobs || [];
  if (jobs.length) parts.push(`${(g.used_milli / 1000).toFixed(jobs.length > 1 || g.used_milli < 1000 ? 2 : 0)} allocated: ` + jobs.map((id) => jobText(id, view)).join(', '));
  else parts.push('free');
  return parts.join(' · ');
}

function cellHtml(n, g, view) {
  const jobs = g.jobs || [];
  const used = g.used_milli || 0;
  let cls = 'g u' + Math.max(0, Math.min(10, Math.round((g.util || 0) / 10)));
  let inner = '';
  if (!g.healthy) cls += ' bad';
  if (jobs.length === 1 && used >= 1000) {
    cls += ' ' + colourOf(jobs[0], view);
  } else if (jobs.length) {
    // Shared: one segment per job, in tenths of the cell, and the free rest.
    cls += ' shared';
    const each = Math.max(1, Math.round((used / 1000 / jobs.length) * 10));
    let left = 10;
    for (const id of jobs) {
      const w = Math.min(each, left);
      left -= w;
      inner += `<i class="s f${w} ${colourOf(id, view)}"></i>`;
    }
    if (left > 0) inner += `<i class="s f${left} free"></i>`;
  } else {
    cls += ' free';
  }
  const dj = jobs.length ? ` data-job="${jobs.join(' ')}"` : '';
  // No title here: 8,000 of them would double the HTML; titleFor() makes
  // one when the pointer reaches the cell.
  return `<div class="${cls}" data-node="${esc(n.name)}" data-gpu="${g.index}"${dj}>${inner}</div>`;
}

// GPUs grouped by NVLink domain, then PCIe switch, each in index order.
function groups(gpus) {
  const nv = new Map();
  for (const g of gpus) {
    const k = g.nvlink < 0 ? 'none' : String(g.nvlink);
    if (!nv.has(k)) nv.set(k, new Map());
    const px = nv.get(k);
    const p = g.pcie < 0 ? 'none' : String(g.pcie);
    if (!px.has(p)) px.set(p, []);
    px.get(p).push(g);
  }
  return nv;
}

function nodeHtml(n, view) {
  const label = nodeLabel(n);
  let body = '';
  for (const [nv, px] of groups(n.gpus || [])) {
    let inner = '';
    for (const [p, gs] of px) {
      inner += `<div class="px" title="PCIe switch ${p === 'none' ? 'unknown' : p}">${gs.map((g) => cellHtml(n, g, view)).join('')}</div>`;
    }
    body += `<div class="nv${nv === 'none' ? ' nonv' : ''}" title="${nv === 'none' ? 'no NVLink' : 'NVLink domain ' + nv}">${inner}</div>`;
  }
  if (!(n.gpus || []).length) body = '<div class="nogpu">no GPUs</div>';
  return `<div class="node st-${esc(label)}" data-node="${esc(n.name)}" data-state="${esc(label)}"><div class="nh"><b class="nn">${esc(n.name)}</b><span class="ns">${esc(label)}</span><span class="na"></span></div><div class="topo">${body}</div></div>`;
}

function nodeTitle(n) {
  const labels = Object.entries(n.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
  return `${n.name}: ${nodeLabel(n)}, ${n.allocated ? n.allocated.gpus : 0}/${n.capacity ? n.capacity.gpus : 0} GPUs allocated, ${n.tasks} task(s)${labels ? '; ' + labels : ''}`;
}

// The tooltip of a cell or a node box under the pointer (set on demand).
export function titleFor(el, nodes, view) {
  const n = nodes.find((x) => x.name === el.dataset.node);
  if (!n) return;
  if (el.dataset.gpu != null) {
    const g = (n.gpus || [])[Number(el.dataset.gpu)];
    if (g) el.title = cellTitle(n, g, view);
  } else {
    el.title = nodeTitle(n) + (el.dataset.fit ? ` · for the highlighted job: ${el.dataset.fit}` : '');
  }
}

function signature(n, view) {
  const jobs = [];
  for (const g of n.gpus || []) for (const id of g.jobs || []) jobs.push(view.jobs.has(id) ? view.jobs.get(id).queue + view.jobs.get(id).name : '?');
  return JSON.stringify([n.state, !!n.lost, n.tasks, n.labels, view.colourBy, jobs,
    (n.gpus || []).map((g) => [g.used_milli, g.jobs, Math.round((g.util || 0) / 10), g.healthy, g.temp_c, g.model, g.nvlink, g.pcie])]);
}

export class GpuMap {
  constructor(el) {
    this.el = el;
    this.names = null;
    this.nodeEls = new Map();
    this.sigs = new Map();
  }

  // Draw nodes (GET /v1/nodes' list); view: {jobs: Map id->job, colourBy}.
  // Returns how many node boxes were (re)built.
  render(nodes, view) {
    const names = nodes.map((n) => n.name).join('\n');
    let built = 0;
    if (names !== this.names) {
      this.el.innerHTML = nodes.map((n) => nodeHtml(n, view)).join('');
      this.names = names;
      this.nodeEls.clear();
      this.sigs.clear();
      for (const e of this.el.children) this.nodeEls.set(e.dataset.node, e);
      for (const n of nodes) this.sigs.set(n.name, signature(n, view));
      return nodes.length;
    }
    const tmp = document.createElement('div');
    for (const n of nodes) {
      const sig = signature(n, view);
      if (this.sigs.get(n.name) === sig) continue;
      tmp.innerHTML = nodeHtml(n, view);
      const fresh = tmp.firstChild;
      this.nodeEls.get(n.name).replaceWith(fresh);
      this.nodeEls.set(n.name, fresh);
      this.sigs.set(n.name, sig);
      built++;
    }
    return built;
  }

  // Report ages: the age the controller gave plus the time since we asked.
  tickAges(nodes, sinceFetchS) {
    for (const n of nodes) {
      const e = this.nodeEls.get(n.name);
      if (!e) continue;
      const a = e.querySelector('.na');
      const age = n.report_age_s == null ? null : n.report_age_s + sinceFetchS;
      const txt = age == null ? 'never' : age < 10 ? age.toFixed(1) + 's' : age < 600 ? Math.round(age) + 's' : Math.round(age / 60) + 'm';
      if (a.textContent !== txt) a.textContent = txt;
      e.classList.toggle('stale', age != null && age > 10);
    }
  }

  // Classes for search hits, highlights and the selected job.
  //   d.search: {nodes: Set, jobs: Set} or null
  //   d.fit: Map node -> reason (nodes a pending job could use), or null
  //   d.toFree: {node, gpus: Set} (GPUs to free for a pending job), or null
  //   d.selectedJob, d.selectedNode
  decorate(d) {
    const any = !!(d.search || d.fit || d.toFree || d.selectedJob || d.selectedNode);
    if (!any && !this.decorated) return; // nothing to set, nothing to clear
    this.decorated = any;
    for (const [name, e] of this.nodeEls) {
      const hitNode = d.search ? d.search.nodes.has(name) : false;
      e.classList.toggle('hit', hitNode);
      e.classList.toggle('dim', !!(d.search && !hitNode) || !!(d.fit && d.fit.get(name) !== 'ok'));
      e.classList.toggle('fit', !!(d.fit && d.fit.get(name) === 'ok'));
      e.classList.toggle('sel', d.selectedNode === name);
      if (d.fit) e.dataset.fit = d.fit.get(name) || '';
      else delete e.dataset.fit;
      for (const c of e.querySelectorAll('.g')) {
        const jobs = c.dataset.job ? c.dataset.job.split(' ') : [];
        c.classList.toggle('hit', !!(d.search && jobs.some((j) => d.search.jobs.has(j))));
        c.classList.toggle('sel', !!(d.selectedJob && jobs.includes(String(d.selectedJob))));
        c.classList.toggle('tofree', !!(d.toFree && d.toFree.node === name && d.toFree.gpus.has(Number(c.dataset.gpu))));
      }
    }
  }

  nodeEl(name) {
    return this.nodeEls.get(name);
  }
}
