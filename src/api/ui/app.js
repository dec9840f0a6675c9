// app.js: the console's state and its loops.
//
//   start ----> GET /v1/status (401: ask for a token) ----> refresh ----> poll
//   poll: GET /v1/events?since=LAST&wait=25, for ever; each batch of events
//         triggers a refresh at once (the map shows a cancel or a node loss
//         as soon as the controller records it) and updates an open detail
//   refresh: GET /v1/nodes, /v1/queues, /v1/jobs?state=active together,
//         then draw; the pending jobs' explanations follow
//   timers: nodes again every few seconds (utilisation, report ages move
//         without events); report ages tick every second
//
// Everything shown comes from the API with the token this tab was given.
// The page records what a test or a script may want to read in
// window.arbiterConsole (ready, when the map was first drawn, counts) and
// in data- attributes of the map (map.js) and of <body> (data-lamport: the
// last event applied).

import { call, takeTokenFromUrl, setToken, token, ApiError, logTail } from './api.js';
import { GpuMap, nodeLabel, titleFor } from './map.js';
import * as P from './panels.js';
import { esc, gpus, jobColour, queueColour } from './util.js';

const PALETTE = 20;
const EXPLAIN_MAX = 50; // pending jobs explained per refresh (each is a filter pass)
const EVENTS_KEPT = 300;

const S = {
  you: null,
  nodes: [],
  jobs: new Map(),
  queues: [],
  explains: new Map(),
  events: [],
  since: 0,
  fetchedAt: 0,
  colourBy: 'job',
  search: null,
  fit: null,
  toFree: null,
  selected: null, // {kind: 'job'|'node', id}
  detailTimer: 0,
};

const C = (window.arbiterConsole = {
  ready: false, // the first map is drawn
  you: null, // {role, team, name} of the token in use (GET /v1/status)
  mapDrawnMs: null, // performance.now() after the first map was painted
  nodes: 0,
  gpus: 0,
  refreshes: 0,
  eventsApplied: 0,
  errors: [], // what went wrong talking to the controller (shown, not thrown)
});

const $ = (id) => document.getElementById(id);
let map;

// ---- small state helpers ------------------------------------------------------------------

function noteError(where, e) {
  const msg = `${where}: ${e && e.message ? e.message : e}`;
  C.errors.push(msg);
  if (C.errors.length > 50) C.errors.shift();
  return msg;
}

function setLive(state, text) {
  const l = $('live');
  l.className = 'live ' + state;
  l.textContent = text;
}

function pendingJobs() {
  return [...S.jobs.values()].filter((j) => j.state === 'pending' || j.state === 'preempted').sort((a, b) => a.id - b.id);
}

function banner(html) {
  const b = $('banner');
  if (!html) {
    b.hidden = true;
    b.innerHTML = '';
    return;
  }
  b.innerHTML = html + ' <button data-act="clear">clear</button>';
  b.hidden = false;
}

// ---- drawing ----------------------------------------------------------------------------------

function summary() {
  const st = { Ready: 0, Draining: 0, NotReady: 0, Lost: 0, Left: 0 };
  let total = 0,
    alloc = 0,
    freeWhole = 0,
    freeOnBusy = 0;
  for (const n of S.nodes) {
    st[nodeLabel(n)] = (st[nodeLabel(n)] || 0) + 1;
    if (n.state === 'Left') continue;
    let free = 0;
    for (const g of n.gpus || []) {
      total++;
      alloc += (g.used_milli || 0) / 1000;
      free += g.healthy && !g.used_milli ? 1 : 0;
    }
    freeWhole += free;
    if (n.tasks > 0) freeOnBusy += free;
  }
  let running = 0,
    pending = 0;
  for (const j of S.jobs.values()) {
    if (j.kind === 'service') continue;
    if (j.state === 'running' || j.state === 'placed') running++;
    if (j.state === 'pending' || j.state === 'preempted') pending++;
  }
  const states = Object.entries(st).filter(([k, v]) => v > 0 && k !== 'Left').map(([k, v]) => `${v} ${k}`).join(', ');
  C.nodes = S.nodes.length;
  C.gpus = total;
  $('summary').textContent = `${S.nodes.length} nodes (${states || 'none'}) · GPUs ${gpus(alloc)}/${total} allocated` +
    ` · fragmentation ${freeWhole ? (freeOnBusy / freeWhole).toFixed(2) : '0.00'} · ${running} running, ${pending} pending` +
    (S.you ? ` · ${S.you.name} (${S.you.role})` : '');
}

function legend() {
  const el = $('legend');
  let h = '';
  if (S.colourBy === 'queue') {
    for (const q of S.queues) h += `<span class="lg"><i class="sw ${queueColour(q.name, PALETTE)}"></i>${esc(q.name)}</span>`;
  } else {
    const held = [...S.jobs.values()].filter((j) => j.state === 'running' || j.state === 'placed').sort((a, b) => a.id - b.id);
    for (const j of held.slice(0, 30)) h += `<a class="lg" href="#job=${j.id}"><i class="sw ${jobColour(j.id, PALETTE)}"></i>${j.id} ${esc(j.name)}</a>`;
    if (held.length > 30) h += `<span class="muted">… ${held.length - 30} more</span>`;
  }
  h += '<span class="lg"><i class="sw free"></i>free</span><span class="lg"><i class="sw bad"></i>unhealthy</span><span class="lg muted">paler: less utilised</span>';
  el.innerHTML = h;
}

function decorate() {
  map.decorate({
    search: S.search,
    fit: S.fit,
    toFree: S.toFree,
    selectedJob: S.selected && S.selected.kind === 'job' ? S.selected.id : null,
    selectedNode: S.selected && S.selected.kind === 'node' ? S.selected.id : null,
  });
}

let autoDense = false;

function drawMap() {
  if (!autoDense && S.nodes.length) {
    // Large clusters open in the density view (before the first drawing).
    autoDense = true;
    if (S.nodes.length > 200) $('dense').checked = true;
  }
  const dense = $('dense').checked;
  $('map').classList.toggle('dense', dense);
  map.render(S.nodes, { jobs: S.jobs, colourBy: S.colourBy });
  decorate();
  map.tickAges(S.nodes, (performance.now() - S.fetchedAt) / 1000);
}

function drawPanels() {
  $('queues').innerHTML = P.queuesHtml(S.queues);
  const pj = pendingJobs();
  $('pending-count').textContent = pj.length ? `(${pj.length})` : '';
  $('pending').innerHTML = P.pendingHtml(pj.slice(0, EXPLAIN_MAX), S.explains) + (pj.length > EXPLAIN_MAX ? `<p class="muted">… ${pj.length - EXPLAIN_MAX} more pending</p>` : '');
  if (!$('tab-events').hidden) $('events').innerHTML = P.eventsHtml(S.events);
}

function draw() {
  summary();
  legend();
  drawMap();
  drawPanels();
  document.body.dataset.lamport = String(S.since);
}

// ---- fetching ----------------------------------------------------------------------------------

let refreshing = null,
  again = false;

// Nodes, queues and active jobs, then draw. Calls while one runs are
// folded into one more run after it.
function refresh() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    do {
      again = false;
      try {
        const [nodes, queues, jobs] = await Promise.all([call('/v1/nodes'), call('/v1/queues'), call('/v1/jobs?state=active')]);
        if (!C.ready) performance.mark('arbiter-fetched');
        S.nodes = nodes.nodes;
        S.queues = queues.queues;
        S.jobs = new Map(jobs.jobs.map((j) => [j.id, j]));
        for (const id of [...S.explains.keys()]) if (!S.jobs.has(id)) S.explains.delete(id);
        S.fetchedAt = performance.now();
        C.refreshes++;
        draw();
        if (!C.ready) performance.mark('arbiter-drawn');
        explainPending();
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) return login(e.message);
        setLive('off', 'error');
        noteError('refresh', e);
      }
    } while (again);
  })().finally(() => {
    refreshing = null;
  });
  return refreshing;
}

async function refreshNodes() {
  if (refreshing) return;
  try {
    const r = await call('/v1/nodes');
    S.nodes = r.nodes;
    S.fetchedAt = performance.now();
    summary();
    drawMap();
  } catch (e) {
    noteError('nodes', e);
  }
}

let explaining = false,
  explainAgain = false;

async function explainPending() {
  if (explaining) {
    explainAgain = true;
    return;
  }
  explaining = true;
  try {
    do {
      explainAgain = false;
      const pj = pendingJobs().slice(0, EXPLAIN_MAX);
      const got = await Promise.all(pj.map((j) => call(`/v1/jobs/${j.id}/explain`).catch((e) => (noteError(`explain ${j.id}`, e), null))));
      got.forEach((x, i) => x && S.explains.set(pj[i].id, x));
      drawPanels();
    } while (explainAgain);
  } finally {
    explaining = false;
  }
}

// The event long poll: one request waiting at the controller at a time.
async function poll() {
  for (;;) {
    try {
      const r = await call(`/v1/events?since=${S.since}&wait=25&limit=1000`);
      setLive('on', 'live');
      if (r.last > S.since) S.since = r.last;
      if (r.events.length) {
        S.events.push(...r.events);
        if (S.events.length > EVENTS_KEPT) S.events.splice(0, S.events.length - EVENTS_KEPT);
        C.eventsApplied += r.events.length;
        refresh();
        const sel = S.selected;
        if (sel && r.events.some((e) => (sel.kind === 'job' ? e.job === sel.id : e.node === sel.id))) openDetail(sel, false);
      }
      document.body.dataset.lamport = String(S.since);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return login(e.message);
      setLive('off', 'reconnecting');
      noteError('events', e);
      await new Promise((res) => setTimeout(res, 1000));
    }
  }
}

// ---- detail ---------------------------------------------------------------------------------------

function showTab(name) {
  for (const b of document.querySelectorAll('.tabs button')) b.classList.toggle('on', b.dataset.tab === name);
  for (const t of ['overview', 'detail', 'events']) $('tab-' + t).hidden = t !== name;
  if (name === 'events') $('events').innerHTML = P.eventsHtml(S.events);
}

async function loadLog(jobId) {
  const sel = $('log-task'), out = $('log'), info = $('log-info');
  if (!sel || !out) return;
  try {
    const r = await logTail(jobId, Number(sel.value), $('log-stream').value, 8192);
    if (!S.selected || S.selected.kind !== 'job' || S.selected.id !== jobId) return;
    out.textContent = r.text;
    info.textContent = `${r.size} bytes on ${r.node}${r.from > 0 ? ', the last ' + (r.size - r.from) + ' shown' : ''}`;
    out.scrollTop = out.scrollHeight;
  } catch (e) {
    info.textContent = noteError('log', e);
  }
}

async function openDetail(sel, switchTab = true) {
  S.selected = sel;
  clearTimeout(S.detailTimer);
  if (switchTab) showTab('detail');
  decorate();
  const el = $('detail');
  try {
    if (sel.kind === 'job') {
      const j = await call(`/v1/jobs/${sel.id}`);
      if (S.selected !== sel) return;
      const keep = $('log-task') ? { task: $('log-task').value, stream: $('log-stream').value, text: $('log').textContent } : null;
      el.innerHTML = P.jobHtml(j);
      if ($('log-task') && keep) {
        if ([...$('log-task').options].some((o) => o.value === keep.task)) $('log-task').value = keep.task;
        $('log-stream').value = keep.stream;
        $('log').textContent = keep.text;
      }
      if (P.loggableTasks(j).length) loadLog(j.id);
      if (j.state === 'running' || j.state === 'placed') S.detailTimer = setTimeout(() => S.selected === sel && openDetail(sel, false), 3000);
    } else {
      const [n, tel] = await Promise.all([call(`/v1/nodes/${encodeURIComponent(sel.id)}`), call(`/v1/nodes/${encodeURIComponent(sel.id)}/telemetry`)]);
      if (S.selected !== sel) return;
      el.innerHTML = P.nodeHtml(n, S.jobs);
      P.drawCharts($('charts'), tel, n);
      S.detailTimer = setTimeout(() => S.selected === sel && openDetail(sel, false), 5000);
      const ne = map.nodeEl(sel.id);
      if (ne && switchTab) ne.scrollIntoView({ block: 'nearest' });
    }
  } catch (e) {
    el.innerHTML = `<p class="warn">${esc(noteError(sel.kind, e))}</p>`;
  }
}

function route() {
  if (/(^#|&)token=/.test(location.hash)) {
    // A link with a token opened in this tab: sign in with it (another
    // token than the one in use: start again as that principal).
    const before = token();
    takeTokenFromUrl();
    if (!$('login').hidden) {
      $('login').hidden = true;
      start();
    } else if (token() !== before) {
      location.reload();
    }
    return;
  }
  const m = location.hash.match(/^#(job|node)=(.+)$/);
  if (!m) return;
  const id = m[1] === 'job' ? Number(m[2]) : decodeURIComponent(m[2]);
  openDetail({ kind: m[1], id });
}

// ---- highlights ---------------------------------------------------------------------------------

async function showFit(id) {
  try {
    const x = await call(`/v1/jobs/${id}/explain?nodes=true`);
    if (!x.node_reasons) return banner(`Job ${id} is ${esc(x.state)}: nothing to highlight.`);
    S.fit = new Map(Object.entries(x.node_reasons));
    S.toFree = null;
    const ok = [...S.fit].filter(([, r]) => r === 'ok').map(([n]) => n);
    banner(`Nodes where a task of job ${id} ('${esc(x.name)}', group ${esc(x.node_reasons_group)}) fits now: ${ok.length} of ${S.fit.size}` +
      (ok.length ? ': ' + ok.slice(0, 20).map(esc).join(', ') + (ok.length > 20 ? ', …' : '') : '') + '. Hover a dimmed node for its reason.');
    decorate();
    const first = ok.length ? map.nodeEl(ok[0]) : null;
    if (first) first.scrollIntoView({ block: 'nearest' });
  } catch (e) {
    banner(esc(noteError(`explain ${id}`, e)));
  }
}

function showToFree(id) {
  const x = S.explains.get(id);
  const best = x && x.explain ? x.explain.best_node : null;
  const n = best ? S.nodes.find((v) => v.name === best) : null;
  if (!n) return banner(`Job ${id}: no node is near to fitting.`);
  const busy = new Set((n.gpus || []).filter((g) => g.healthy && (g.jobs || []).length).map((g) => g.index));
  S.toFree = { node: best, gpus: busy };
  S.fit = null;
  banner(`Job ${id}: ${esc(x.hint || 'free GPUs on node ' + best)} The GPUs in use on ${esc(best)} are marked.`);
  decorate();
  const e = map.nodeEl(best);
  if (e) e.scrollIntoView({ block: 'nearest' });
}

function doSearch() {
  const s = $('search').value.trim();
  if (!s) {
    S.search = null;
    $('search-count').textContent = '';
    decorate();
    return;
  }
  const nodes = new Set(),
    jobs = new Set();
  const idm = s.match(/^#?(\d+)$/);
  const low = s.toLowerCase();
  for (const j of S.jobs.values()) if ((idm && String(j.id) === idm[1]) || (!idm && j.name.toLowerCase().includes(low))) jobs.add(String(j.id));
  if (idm) jobs.add(idm[1]);
  for (const n of S.nodes) {
    // A number is a job id (and a node only by its whole name); else a part of a name.
    if (idm ? n.name === s : n.name.toLowerCase().includes(low)) nodes.add(n.name);
    for (const g of n.gpus || []) if ((g.jobs || []).some((id) => jobs.has(String(id)))) nodes.add(n.name);
  }
  S.search = { nodes, jobs };
  $('search-count').textContent = `${nodes.size} node(s)`;
  decorate();
}

// ---- wiring -----------------------------------------------------------------------------------------

function wire() {
  $('map').addEventListener('mouseover', (ev) => {
    const e = ev.target.closest('.g, .node');
    if (e) titleFor(e, S.nodes, { jobs: S.jobs, colourBy: S.colourBy });
  });
  $('map').addEventListener('click', (ev) => {
    const cell = ev.target.closest('.g');
    const node = ev.target.closest('.node');
    if (cell && cell.dataset.job) location.hash = 'job=' + cell.dataset.job.split(' ')[0];
    else if (node) location.hash = 'node=' + encodeURIComponent(node.dataset.node);
  });
  document.body.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-act]');
    if (!b) return;
    const act = b.dataset.act;
    if (act === 'fit') showFit(Number(b.dataset.job));
    else if (act === 'free') showToFree(Number(b.dataset.job));
    else if (act === 'clear') {
      S.fit = S.toFree = null;
      banner('');
      decorate();
    } else if (act === 'log' && S.selected && S.selected.kind === 'job') loadLog(S.selected.id);
  });
  document.body.addEventListener('change', (ev) => {
    if ((ev.target.id === 'log-task' || ev.target.id === 'log-stream') && S.selected) loadLog(S.selected.id);
  });
  for (const b of document.querySelectorAll('.tabs button')) b.addEventListener('click', () => showTab(b.dataset.tab));
  $('search').addEventListener('input', doSearch);
  $('search').addEventListener('keydown', (ev) => {
    if (ev.key !== 'Enter' || !S.search) return;
    const first = [...S.search.nodes][0];
    if (first && map.nodeEl(first)) map.nodeEl(first).scrollIntoView({ block: 'center' });
  });
  $('dense').addEventListener('change', drawMap);
  $('colour-by').addEventListener('change', (ev) => {
    S.colourBy = ev.target.value;
    legend();
    drawMap();
  });
  window.addEventListener('hashchange', route);
  $('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    setToken($('login-token').value.trim());
    $('login').hidden = true;
    start();
  });
}

function login(why) {
  setLive('off', 'signed out');
  $('login-why').textContent = token() ? `The token was refused: ${why}` : 'This controller wants a bearer token (its --tokens file; the CLI reads ARBITER_TOKEN).';
  $('login').hidden = false;
  $('login-token').focus();
}

let timers = false;

async function start() {
  takeTokenFromUrl();
  let status;
  try {
    status = await call('/v1/status');
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return login(e.message);
    setLive('off', 'unreachable');
    noteError('status', e);
    setTimeout(start, 2000);
    return;
  }
  S.you = C.you = status.you;
  S.since = status.lamport;
  await refresh();
  setLive('on', 'live');
  if (!C.ready) {
    // After the next frame is painted: the first full map on screen.
    requestAnimationFrame(() =>
      setTimeout(() => {
        C.mapDrawnMs = performance.now();
        performance.mark('arbiter-map-drawn');
        C.ready = true;
        document.body.dataset.ready = '1';
      }, 0),
    );
  }
  route();
  if (!timers) {
    timers = true;
    setInterval(() => map.tickAges(S.nodes, (performance.now() - S.fetchedAt) / 1000), 1000);
    setInterval(refreshNodes, S.nodes.length > 500 ? 5000 : 2000);
  }
  poll();
}

map = new GpuMap($('map'));
wire();
start();
