/**
 * The live view's page: one self-contained HTML document (inline CSS and plain inline JS, no
 * library, nothing fetched but its own event stream) that draws every chart from the models it
 * is given and lights up the states of the live actors as `/debug/actors/events` reports them.
 *
 * ## Layout
 * Each chart is nested boxes, one per state, children in a wrapping row, in declaration order.
 * A box lists its transitions (`event [guard] → target`); targetless ones are gathered on one
 * line. Arrows between boxes are an SVG layer drawn from the boxes' measured positions after
 * layout (and again on resize); hovering a transition row brings its arrow forward. Arrows are
 * omitted between a box and its own ancestor: the row says it.
 *
 * ## Invariants
 * - **Data never becomes markup**: everything that came from a request (render keys, labels,
 *   feed values) is set through `textContent`; the chart JSON is embedded with `<` escaped.
 * - **Nothing external**: the server sends a CSP of `default-src 'none'` with inline script and
 *   style and `connect-src 'self'`, so a stray external reference would fail, not load.
 * - **The page holds no state the stream cannot rebuild**: a reconnect's `snapshot` replaces it.
 *
 * ## Races
 * - *Stream breaks*: EventSource reconnects (the server's `retry`), and the new `snapshot`
 *   clears what the page showed, so no actor from before the break lingers as live.
 * - *`gone` then a late `actor` for the same id*: an ended id is remembered and ignored.
 *
 * ## Hooks for tests and readers
 * | Selector | Meaning |
 * |---|---|
 * | `[data-chart=C] [data-state=ID].active` | some live actor of chart C is in state ID |
 * | `#sem-held`, `#sem-queued`, `#sem-q-<class>` | the semaphore's counts |
 * | `#renders tr[data-key]` | one live render coordinator per key |
 * | `#conn[data-state=open]` | the event stream is connected |
 * | `[data-state=ID].last` / `.failed` | an actor that just ended / failed was last in state ID |
 * | `#sequence g[data-seq]`, `#mermaid` | the sequence diagram's arrows, its Mermaid text |
 * | replay: `body[data-ready=true]` | the recording is loaded |
 * | replay: `#step-info[data-seq][data-kind]` | the entry shown now |
 * | replay: `#incident.shown[data-check]` | an invariant failed at or before this entry |
 * | replay: `body[data-cause=true]` | the entry shown is the one that broke the invariant |
 *
 * ## Replay
 * With `{ replay: true }` the page fetches `…/recording` once instead of opening the stream,
 * and rebuilds every chart's state at the chosen entry from the recording's `initial` states
 * and the snapshots up to it (an actor that ended within the last 40 entries stays, dimmed).
 * Stepping moves by entry, within what the filters keep; the URL's `#seq=N` names the entry.
 */
import type { ChartModel } from './chartModel.js';

/** An actor that ended stays on screen, dimmed, this long, so a short render can be seen. */
export const ENDED_VISIBLE_MS = 4_000;
/** Feed lines kept on screen. */
export const FEED_LINES = 60;

const STYLE = `
:root { font: 13px/1.35 system-ui, sans-serif; color: #1d232b; background: #f5f6f8; }
body { margin: 0; padding: 12px 16px 40px; }
header { display: flex; gap: 16px; align-items: baseline; }
h1 { font-size: 18px; margin: 0 0 8px; }
h2 { font-size: 14px; margin: 0 0 6px; }
#conn { font-size: 12px; padding: 1px 8px; border-radius: 9px; background: #ddd; }
#conn[data-state=open] { background: #c8efd0; }
#conn[data-state=error] { background: #f5c9c9; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin-bottom: 12px; }
.card { background: #fff; border: 1px solid #d5d9df; border-radius: 6px; padding: 8px 10px; min-width: 220px; }
.card table { border-collapse: collapse; font-size: 12px; }
.card td, .card th { padding: 1px 6px; text-align: left; border-bottom: 1px solid #eee; }
.big { font-size: 20px; font-weight: 600; }
.bar { display: inline-block; height: 8px; background: #5b8def; vertical-align: middle; margin-left: 4px; }
tr.ended, .chip.ended { opacity: .45; text-decoration: line-through; }
.chart { background: #fff; border: 1px solid #d5d9df; border-radius: 6px; padding: 8px 10px; margin-bottom: 12px; }
.chart .meta { font-size: 12px; color: #555; margin-bottom: 6px; }
.chips { display: flex; flex-wrap: wrap; gap: 4px; margin-bottom: 6px; }
.chip { font-size: 11px; border: 1px solid #b9c3d0; border-radius: 9px; padding: 0 7px; background: #eef2f7; max-width: 520px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; cursor: pointer; }
.chip.focus { background: #ffe9a8; border-color: #d8a400; }
.canvas { position: relative; }
.canvas > svg { position: absolute; left: 0; top: 0; z-index: 2; pointer-events: none; overflow: visible; }
.state { position: relative; border: 1.5px solid #8a97a8; border-radius: 7px; padding: 4px 6px; margin: 4px; background: #fbfcfd; min-width: 120px; }
.state.type-final { border-style: double; border-width: 4px; }
.state.type-parallel > .kids > .state { border-style: dashed; }
.state.active { border-color: #1f7a3a; background: #e3f6e8; box-shadow: 0 0 0 2px #7dcf93; }
.state.focus { box-shadow: 0 0 0 3px #e0a800; }
.state.last { border-style: dashed; border-color: #1f7a3a; background: #f0faf2; }
.state.failed { border-color: #b3261e; background: #fde3e1; box-shadow: 0 0 0 3px #e8837b; }
#replay { position: sticky; top: 0; z-index: 5; background: #fff; border: 1px solid #d5d9df; border-radius: 6px; padding: 8px 10px; margin-bottom: 12px; }
#replay .row { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 2px 0; }
#scrub { flex: 1; min-width: 300px; }
#step-info { font: 12px/1.3 ui-monospace, monospace; }
#incident { display: none; background: #fde3e1; border: 1px solid #b3261e; border-radius: 6px; padding: 4px 8px; }
#incident.shown { display: block; }
#log { font: 11px/1.35 ui-monospace, monospace; max-height: 180px; overflow: auto; margin: 4px 0 0; padding-left: 0; list-style: none; }
#log li.current { background: #ffe9a8; }
#log li.invariant { color: #b3261e; font-weight: 600; }
#sequence svg text { font: 11px system-ui, sans-serif; }
#mermaid { width: 100%; min-height: 120px; font: 11px ui-monospace, monospace; }
.head { display: flex; gap: 6px; align-items: baseline; font-weight: 600; }
.head .init { color: #1f5fbf; font-size: 10px; }
.head .badge { font-size: 11px; font-weight: 600; color: #fff; background: #1f7a3a; border-radius: 8px; padding: 0 6px; display: none; }
.state.active > .head .badge { display: inline; }
.inv { font-size: 11px; font-style: italic; color: #6a4c93; }
ul.tx { list-style: none; margin: 2px 0; padding: 0; font-size: 11px; color: #374151; }
ul.tx li { white-space: nowrap; }
ul.tx li.self { color: #7b8594; white-space: normal; max-width: 420px; }
ul.tx li:hover { color: #c0392b; }
.g { color: #8a6d00; }
.kids { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 6px 18px; }
path.arrow { fill: none; stroke: #9aa6b5; stroke-width: 1.2; opacity: .55; }
path.arrow.hot { stroke: #c0392b; stroke-width: 2; opacity: 1; }
#feed { font: 11px/1.3 ui-monospace, monospace; max-height: 260px; overflow: auto; padding-left: 18px; }
`;

const SCRIPT = String.raw`
'use strict';
const CHARTS = JSON.parse(document.getElementById('chart-data').textContent);
const ENDED_MS = Number(document.body.dataset.endedMs);
const FEED_LINES = Number(document.body.dataset.feedLines);
const actors = new Map();   // id -> view
const ended = new Map();    // id -> view (dimmed until removed)
const endedIds = new Set();
let focus = null;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}
function shortId(id, chart) { return id.startsWith(chart.id + '.') ? id.slice(chart.id.length + 1) : id; }

// ---- drawing the charts from their models ------------------------------------------------
function drawState(node, chart, isInitial) {
  const box = el('div', 'state type-' + node.type);
  box.dataset.state = node.id;
  const head = el('div', 'head');
  if (isInitial) head.append(el('span', 'init', '\u25CF\u2192'));
  head.append(el('span', 'name', node.key), el('span', 'badge', ''));
  box.append(head);
  if (node.invokes.length) box.append(el('div', 'inv', 'invokes ' + node.invokes.join(', ')));
  const list = el('ul', 'tx');
  const targetless = [];
  for (const t of node.transitions) {
    if (t.targets.length === 0) { if (!targetless.includes(t.label)) targetless.push(t.label); continue; }
    const li = el('li');
    li.dataset.from = t.source;
    li.dataset.to = t.targets.join(' ');
    li.append(el('span', '', t.label));
    if (t.guard) li.append(el('span', 'g', ' [' + t.guard + ']'));
    li.append(document.createTextNode(' \u2192 ' + t.targets.map((x) => shortId(x, chart)).join(', ')));
    li.title = t.actions.length ? 'actions: ' + t.actions.join(', ') : 'no actions';
    list.append(li);
  }
  if (targetless.length) list.append(el('li', 'self', '\u21BA ' + targetless.join(', ')));
  if (list.childElementCount) box.append(list);
  if (node.children.length) {
    const kids = el('div', 'kids');
    for (const c of node.children) kids.append(drawState(c, chart, node.initial.includes(c.id)));
    box.append(kids);
  }
  return box;
}

function drawChart(chart) {
  const sec = el('section', 'chart');
  sec.dataset.chart = chart.id;
  sec.append(el('h2', '', chart.title));
  const meta = el('div', 'meta', 'machine id ' + chart.id + ' \u00B7 live: ');
  const count = el('span', 'live-count', '0');
  meta.append(count);
  const chips = el('div', 'chips');
  const canvas = el('div', 'canvas');
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  canvas.append(svg, drawState(chart.root, chart, true));
  sec.append(meta, chips, canvas);
  return sec;
}

function contains(a, b) { return a !== b && a.contains(b); }
function edgePoint(r, tx, ty) {
  const cx = r.x + r.w / 2, cy = r.y + r.h / 2, dx = tx - cx, dy = ty - cy;
  if (dx === 0 && dy === 0) return [cx, cy];
  const s = Math.min(Math.abs((r.w / 2) / (dx || 1e-9)), Math.abs((r.h / 2) / (dy || 1e-9)));
  return [cx + dx * s, cy + dy * s];
}
function drawArrows(sec) {
  const canvas = sec.querySelector('.canvas');
  const svg = canvas.querySelector('svg');
  const base = canvas.getBoundingClientRect();
  svg.setAttribute('width', String(base.width));
  svg.setAttribute('height', String(base.height));
  svg.textContent = '';
  const ns = 'http://www.w3.org/2000/svg';
  const defs = document.createElementNS(ns, 'defs');
  const marker = document.createElementNS(ns, 'marker');
  const mid = 'm-' + sec.dataset.chart;
  marker.setAttribute('id', mid);
  marker.setAttribute('viewBox', '0 0 10 10');
  marker.setAttribute('refX', '9'); marker.setAttribute('refY', '5');
  marker.setAttribute('markerWidth', '7'); marker.setAttribute('markerHeight', '7');
  marker.setAttribute('orient', 'auto-start-reverse');
  const tip = document.createElementNS(ns, 'path');
  tip.setAttribute('d', 'M0,0 L10,5 L0,10 z');
  tip.setAttribute('fill', '#9aa6b5');
  marker.append(tip); defs.append(marker); svg.append(defs);
  const boxes = new Map();
  for (const b of canvas.querySelectorAll('.state')) boxes.set(b.dataset.state, b);
  const rect = (b) => { const r = b.getBoundingClientRect(); return { x: r.left - base.left, y: r.top - base.top, w: r.width, h: r.height }; };
  const drawn = new Map();
  for (const li of canvas.querySelectorAll('li[data-from]')) {
    const from = boxes.get(li.dataset.from);
    for (const to of li.dataset.to.split(' ')) {
      const target = boxes.get(to);
      if (!from || !target || from === target || contains(from, target) || contains(target, from)) continue;
      const key = li.dataset.from + '>' + to;
      let path = drawn.get(key);
      if (!path) {
        const a = rect(from), b = rect(target);
        const [x1, y1] = edgePoint(a, b.x + b.w / 2, b.y + b.h / 2);
        const [x2, y2] = edgePoint(b, a.x + a.w / 2, a.y + a.h / 2);
        const mx = (x1 + x2) / 2 - (y2 - y1) * 0.15, my = (y1 + y2) / 2 + (x2 - x1) * 0.15;
        path = document.createElementNS(ns, 'path');
        path.setAttribute('class', 'arrow');
        path.setAttribute('d', 'M' + x1 + ',' + y1 + ' Q' + mx + ',' + my + ' ' + x2 + ',' + y2);
        path.setAttribute('marker-end', 'url(#' + mid + ')');
        svg.append(path);
        drawn.set(key, path);
      }
      li.addEventListener('mouseenter', () => path.classList.add('hot'));
      li.addEventListener('mouseleave', () => path.classList.remove('hot'));
    }
  }
}

const chartsEl = document.getElementById('charts');
for (const chart of CHARTS) chartsEl.append(drawChart(chart));
function redrawArrows() { for (const sec of document.querySelectorAll('.chart')) drawArrows(sec); }
let resizeTimer = null;
window.addEventListener('resize', () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(redrawArrows, 100); });

// ---- live state --------------------------------------------------------------------------
function allViews() { return [...actors.values(), ...ended.values()]; }

function paintCharts() {
  for (const sec of document.querySelectorAll('.chart')) {
    const id = sec.dataset.chart;
    const live = [...actors.values()].filter((a) => a.chart === id);
    const counts = new Map();
    for (const a of live) for (const s of a.active) counts.set(s, (counts.get(s) || 0) + 1);
    const focused = focus && actors.get(focus);
    const failed = new Set();
    const last = new Set();
    for (const a of ended.values()) {
      if (a.chart !== id) continue;
      for (const s of a.active) (a.status === 'error' ? failed : last).add(s);
    }
    for (const box of sec.querySelectorAll('.state')) {
      const n = counts.get(box.dataset.state) || 0;
      box.classList.toggle('active', n > 0);
      box.classList.toggle('failed', failed.has(box.dataset.state));
      box.classList.toggle('last', n === 0 && last.has(box.dataset.state));
      box.querySelector('.badge').textContent = n > 1 ? '\u00D7' + n : '\u25CF';
      box.classList.toggle('focus', !!focused && focused.chart === id && focused.active.includes(box.dataset.state));
    }
    sec.querySelector('.live-count').textContent = String(live.length);
    const chips = sec.querySelector('.chips');
    chips.textContent = '';
    for (const a of allViews().filter((v) => v.chart === id)) {
      const chip = el('span', 'chip' + (ended.has(a.id) ? ' ended' : '') + (focus === a.id ? ' focus' : ''), a.label + ': ' + a.value);
      chip.title = a.label + '\n' + a.value + '\n' + JSON.stringify(a.details);
      chip.dataset.actor = a.id;
      chip.addEventListener('click', () => { focus = focus === a.id ? null : a.id; paint(); });
      chips.append(chip);
    }
  }
}

function setText(id, v) { const e = document.getElementById(id); if (e) e.textContent = v === undefined || v === null ? '\u2013' : String(v); }

function paintCards() {
  const views = [...actors.values()];
  const sem = views.find((a) => a.chart === 'semaphore');
  const d = sem ? sem.details : {};
  setText('sem-held', d.held); setText('sem-capacity', d.capacity);
  setText('sem-queued', d.queued); setText('sem-queueSize', d.queueSize);
  setText('sem-holders', d.holders || ''); setText('sem-waiters', d.waiters || '');
  for (const cls of ['interactive', 'high', 'normal', 'low']) {
    const n = d['queued_' + cls];
    setText('sem-q-' + cls, n);
    const bar = document.getElementById('sem-bar-' + cls);
    if (bar) bar.style.width = Math.min(200, (n || 0) * 12) + 'px';
  }
  const pl = views.find((a) => a.chart === 'probeLimiter');
  setText('probe-held', pl ? pl.details.held : null); setText('probe-capacity', pl ? pl.details.capacity : null);
  const rd = views.find((a) => a.chart === 'readiness');
  setText('readiness', rd ? rd.value : null);

  const pools = document.getElementById('pools');
  pools.textContent = '';
  for (const p of views.filter((a) => a.chart === 'processSupervisor')) {
    const tr = el('tr');
    tr.dataset.pool = p.label;
    for (const v of [p.label, p.value, p.details.generation, p.details.tasksSinceStart, p.details.restarts, p.details.healthy]) tr.append(el('td', '', v));
    pools.append(tr);
  }

  const renders = document.getElementById('renders');
  renders.textContent = '';
  const coordinators = allViews().filter((a) => a.chart === 'renderCoordinator');
  for (const c of coordinators) {
    const tr = el('tr', ended.has(c.id) ? 'ended' : '');
    tr.dataset.key = String(c.details.key || c.label);
    tr.dataset.state = c.value;
    const child = allViews().find((v) => v.parent === c.id && v.chart === 'render');
    const key = String(c.details.key || c.label);
    const input = String(c.details.input || '');
    const variant = (c.details.output || '?') + ' \u2190 ' + input.slice(input.lastIndexOf('/') + 1);
    for (const v of [key.slice(0, 12) + '\u2026', variant, c.value, child ? child.value : '', c.details.subscribers, c.details.bytes]) tr.append(el('td', '', v));
    tr.title = key + '\n' + input;
    renders.append(tr);
  }
  if (!coordinators.length) { const tr = el('tr'); tr.append(el('td', 'none', 'no render in progress')); renders.append(tr); }

  const room = views.find((a) => a.chart === 'waitingRoom');
  const roomEl = document.getElementById('room');
  roomEl.textContent = room
    ? room.value + ' \u00B7 queued ' + room.details.queue + ' \u00B7 tickets ' + room.details.tickets + ' \u00B7 slots ' + room.details.slots + (room.details.meanS != null ? ' \u00B7 mean ' + room.details.meanS + ' s' : '')
    : 'off (AP_WAITING_ROOM is not set)';
}

let painting = false;
function paint() {
  if (painting) return;
  painting = true;
  requestAnimationFrame(() => { painting = false; paintCharts(); paintCards(); });
}

function upsert(view) {
  if (endedIds.has(view.id)) return;
  actors.set(view.id, view);
  paint();
}
function gone(id) {
  const view = actors.get(id);
  actors.delete(id);
  endedIds.add(id);
  if (focus === id) focus = null;
  if (view) {
    ended.set(id, view);
    setTimeout(() => { ended.delete(id); paint(); }, ENDED_MS);
  }
  paint();
}

const feedEl = document.getElementById('feed');
function addFeed(item) {
  const t = new Date(item.at).toISOString().slice(11, 23);
  const parts = Object.entries(item.data).map(([k, v]) => k + '=' + v).join(' ');
  const li = el('li', '', t + ' ' + item.channel + ' ' + parts);
  feedEl.prepend(li);
  while (feedEl.childElementCount > FEED_LINES) feedEl.lastElementChild.remove();
}

`;

const LIVE_SCRIPT = String.raw`
const conn = document.getElementById('conn');
const stream = new EventSource(location.pathname.replace(/\/+$/, '') + '/events');
stream.addEventListener('open', () => { conn.dataset.state = 'open'; conn.textContent = 'live'; });
stream.addEventListener('error', () => { conn.dataset.state = 'error'; conn.textContent = 'reconnecting\u2026'; });
stream.addEventListener('snapshot', (e) => {
  const data = JSON.parse(e.data);
  actors.clear(); ended.clear(); endedIds.clear(); feedEl.textContent = '';
  for (const v of data.actors) actors.set(v.id, v);
  for (const item of data.feed) addFeed(item);
  paint();
  requestAnimationFrame(redrawArrows);
});
stream.addEventListener('actor', (e) => upsert(JSON.parse(e.data)));
stream.addEventListener('gone', (e) => gone(JSON.parse(e.data).id));
stream.addEventListener('feed', (e) => addFeed(JSON.parse(e.data)));
redrawArrows();
`;

const SEQUENCE_SCRIPT = String.raw`
// ---- sequence diagrams (one request, key or actor), from the recording or the live recorder --
const seqEl = document.getElementById('sequence');
const mermaidEl = document.getElementById('mermaid');
let sequence = null;
function filterQuery() {
  const q = new URLSearchParams();
  for (const [name, id] of [['request', 'f-request'], ['key', 'f-key'], ['actor', 'f-actor']]) {
    const v = document.getElementById(id).value.trim();
    if (v) q.set(name, v);
  }
  return q;
}
function fillActors(list) {
  const sel = document.getElementById('f-actor');
  const keep = sel.value;
  sel.textContent = '';
  sel.append(new Option('(any actor)', ''));
  for (const a of list) sel.append(new Option(a.name, a.actor));
  sel.value = keep;
}
async function loadSequence() {
  const q = filterQuery();
  const r = await fetch(BASE + '/sequence?' + q.toString());
  if (!r.ok) { seqEl.textContent = await r.text(); sequence = null; return null; }
  sequence = await r.json();
  fillActors(sequence.actors);
  mermaidEl.value = sequence.mermaid;
  return sequence;
}
function drawSequence(currentSeq) {
  seqEl.textContent = '';
  if (!sequence) return;
  if (!sequence.messages.length) { seqEl.append(el('div', 'none', 'no messages: choose a request, a key or an actor')); return; }
  const ns = 'http://www.w3.org/2000/svg';
  const colW = 130, rowH = 20, top = 30;
  const col = new Map(sequence.participants.map((p, i) => [p.id, i]));
  const w = sequence.participants.length * colW + 20, h = top + sequence.messages.length * rowH + 20;
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('width', String(w)); svg.setAttribute('height', String(h));
  const x = (id) => 10 + col.get(id) * colW + colW / 2;
  sequence.participants.forEach((p) => {
    const t = document.createElementNS(ns, 'text');
    t.setAttribute('x', String(x(p.id))); t.setAttribute('y', '16'); t.setAttribute('text-anchor', 'middle');
    t.setAttribute('font-weight', '600'); t.textContent = p.label;
    const l = document.createElementNS(ns, 'line');
    l.setAttribute('x1', String(x(p.id))); l.setAttribute('x2', String(x(p.id)));
    l.setAttribute('y1', '22'); l.setAttribute('y2', String(h - 6)); l.setAttribute('stroke', '#c5ccd6');
    svg.append(l, t);
  });
  sequence.messages.forEach((m, i) => {
    const g = document.createElementNS(ns, 'g');
    g.dataset.seq = String(m.seq);
    const y = top + i * rowH + 12, x1 = x(m.from), x2 = x(m.to);
    const past = currentSeq === undefined || m.seq <= currentSeq;
    const now = currentSeq !== undefined && m.seq <= currentSeq && (i + 1 >= sequence.messages.length || sequence.messages[i + 1].seq > currentSeq);
    const color = now ? '#c0392b' : past ? '#1d232b' : '#b8c0cc';
    if (now) g.setAttribute('class', 'now');
    const line = document.createElementNS(ns, 'path');
    const dir = x2 >= x1 ? 1 : -1;
    if (m.note) line.setAttribute('d', 'M' + (x1 - 50) + ',' + (y + 4) + ' L' + (x1 + 50) + ',' + (y + 4));
    else line.setAttribute('d', 'M' + x1 + ',' + y + ' L' + x2 + ',' + y + ' M' + (x2 - dir * 6) + ',' + (y - 4) + ' L' + x2 + ',' + y + ' L' + (x2 - dir * 6) + ',' + (y + 4));
    if (m.note) line.setAttribute('stroke-dasharray', '3 2');
    line.setAttribute('stroke', color); line.setAttribute('fill', 'none'); line.setAttribute('stroke-width', now ? '2' : '1.2');
    const t = document.createElementNS(ns, 'text');
    t.setAttribute('x', String((x1 + x2) / 2)); t.setAttribute('y', String(y - 3)); t.setAttribute('text-anchor', 'middle');
    t.setAttribute('fill', color);
    t.textContent = m.count > 1 ? m.label + ' \u00D7' + m.count : m.label;
    g.append(line, t);
    svg.append(g);
  });
  seqEl.append(svg);
  if (sequence.omitted) seqEl.append(el('div', 'none', sequence.omitted + ' more messages not drawn'));
}
document.getElementById('seq-export').addEventListener('click', () => { mermaidEl.hidden = !mermaidEl.hidden; });
`;

const REPLAY_SCRIPT = String.raw`
// ---- replay: the page over a recording, one entry at a time --------------------------------
const conn = document.getElementById('conn');
conn.dataset.state = 'open'; conn.textContent = 'replay';
const CHART = new Map(CHARTS.map((c) => [c.id, c]));
const INFO = new Map();
let REC = null;
let steps = [];     // indices into REC.entries the filters keep
let pos = 0;        // index into steps
let playing = null;
let invariantAt = -1;
let causeAt = -1;
const scrub = document.getElementById('scrub');
const info = document.getElementById('step-info');
const logEl = document.getElementById('log');
const incident = document.getElementById('incident');

function activeFor(chart, value) {
  const out = [chart.root.id];
  if (!value) return out;
  for (const leaf of value.split(', ')) {
    let node = chart.root;
    for (const k of leaf.split('.')) {
      const c = node.children.find((x) => x.key === k);
      if (!c) break;
      if (!out.includes(c.id)) out.push(c.id);
      node = c;
    }
  }
  return out;
}
function nameOf(id) {
  if (id === null) return 'HTTP';
  const name = (INFO.get(id) || { name: id }).name;
  return name.replace(/[0-9a-f]{24,}/g, (k) => k.slice(0, 8) + '…');
}
function viewOf(s) {
  const a = INFO.get(s.actor);
  const chart = a && CHART.get(a.chart);
  if (!chart) return null;
  return { id: s.actor, chart: a.chart, label: a.name, parent: a.parent, status: s.status, value: s.value, active: activeFor(chart, s.value), details: s.details };
}
function stateAt(i) {
  const last = new Map();
  for (const s of REC.header.initial) last.set(s.actor, [s, -Infinity]);
  for (let k = 0; k <= i; k++) { const e = REC.entries[k]; if (e.kind === 'snapshot') last.set(e.actor, [e, k]); }
  actors.clear(); ended.clear();
  for (const [id, [s, at]] of last) {
    const v = viewOf(s);
    if (!v) continue;
    if (s.status === 'active') actors.set(id, v);
    else if (s.status === 'error' || i - at < 40) ended.set(id, v);
  }
}
function describe(e) {
  switch (e.kind) {
    case 'actor': return 'created ' + nameOf(e.actor);
    case 'event': {
      const fields = Object.entries(e.event).filter(([k]) => k !== 'type').map(([k, v]) => k + '=' + v).join(' ');
      return nameOf(e.source) + ' \u2192 ' + nameOf(e.actor) + ': ' + e.event.type + (fields ? ' ' + fields : '');
    }
    case 'snapshot': return nameOf(e.actor) + ' is ' + e.status + (e.value ? ' in ' + e.value : '');
    case 'telemetry': return e.channel + ' ' + Object.entries(e.data).map(([k, v]) => k + '=' + v).join(' ');
    case 'invariant': return 'INVARIANT ' + e.check + ' failed: ' + e.message;
  }
  return e.kind;
}
function at(i) { const e = REC.entries[i]; return '#' + e.seq + ' +' + (e.t - REC.entries[0].t).toFixed(1) + ' ms'; }
function go(p) {
  if (!steps.length) return;
  pos = Math.max(0, Math.min(steps.length - 1, p));
  const i = steps[pos];
  const e = REC.entries[i];
  stateAt(i);
  paint();
  scrub.max = String(steps.length - 1); scrub.value = String(pos);
  info.dataset.seq = String(e.seq); info.dataset.kind = e.kind; info.dataset.index = String(i);
  info.textContent = 'step ' + (pos + 1) + '/' + steps.length + ' \u00B7 ' + at(i) + ' \u00B7 ' + describe(e);
  logEl.textContent = '';
  for (let k = Math.max(0, pos - 12); k < Math.min(steps.length, pos + 13); k++) {
    const x = REC.entries[steps[k]];
    const li = el('li', (k === pos ? 'current ' : '') + (x.kind === 'invariant' ? 'invariant' : ''), at(steps[k]) + ' ' + describe(x));
    li.dataset.seq = String(x.seq);
    li.addEventListener('click', () => go(k));
    logEl.append(li);
    if (k === pos) requestAnimationFrame(() => { logEl.scrollTop = li.offsetTop - logEl.offsetTop - 60; });
  }
  const broken = invariantAt >= 0 && i >= invariantAt;
  incident.classList.toggle('shown', broken);
  if (broken) {
    const inv = REC.entries[invariantAt];
    incident.dataset.check = inv.check;
    const cause = causeAt >= 0 ? REC.entries[causeAt] : inv;
    incident.textContent = 'Invariant ' + inv.check + ' failed at ' + at(invariantAt) + ': ' + inv.message + '. The step that broke it, ' + at(causeAt >= 0 ? causeAt : invariantAt) + ': ' + describe(cause);
  }
  document.body.dataset.cause = String(i === causeAt);
  location.replace('#seq=' + e.seq);
  drawSequence(e.seq);
}
function applyFilters() {
  const involved = sequence && filterQuery().toString() ? new Set(sequence.involved) : null;
  const current = steps.length ? steps[pos] : 0;
  steps = [];
  REC.entries.forEach((e, i) => {
    if (!involved || e.kind === 'invariant' || (e.actor && involved.has(e.actor)) || (e.source && involved.has(e.source))) steps.push(i);
  });
  let p = 0;
  while (p + 1 < steps.length && steps[p + 1] <= current) p++;
  go(p);
}
function stop() { if (playing) { clearInterval(playing); playing = null; } document.getElementById('play').textContent = 'Play'; }
document.getElementById('play').addEventListener('click', () => {
  if (playing) return stop();
  document.getElementById('play').textContent = 'Pause';
  playing = setInterval(() => { if (pos + 1 >= steps.length) stop(); else go(pos + 1); }, Number(document.getElementById('speed').value));
});
document.getElementById('step').addEventListener('click', () => { stop(); go(pos + 1); });
document.getElementById('step-back').addEventListener('click', () => { stop(); go(pos - 1); });
document.getElementById('first').addEventListener('click', () => { stop(); go(0); });
document.getElementById('last').addEventListener('click', () => { stop(); go(steps.length - 1); });
document.getElementById('goto-cause').addEventListener('click', () => {
  stop();
  let p = steps.indexOf(causeAt);
  if (p < 0) { p = 0; while (p + 1 < steps.length && steps[p + 1] <= causeAt) p++; }
  if (causeAt >= 0) go(p);
});
document.getElementById('goto-incident').addEventListener('click', () => {
  stop();
  const p = steps.indexOf(invariantAt);
  if (p >= 0) go(p);
});
scrub.addEventListener('input', () => { stop(); go(Number(scrub.value)); });
document.addEventListener('keydown', (ev) => {
  if (ev.target instanceof HTMLInputElement && ev.target.type !== 'range') return;
  if (ev.key === 'ArrowRight') { stop(); go(pos + 1); }
  if (ev.key === 'ArrowLeft') { stop(); go(pos - 1); }
});
for (const id of ['f-request', 'f-key', 'f-actor']) {
  document.getElementById(id).addEventListener('change', async () => { await loadSequence(); applyFilters(); });
}
document.getElementById('seq-draw').addEventListener('click', async () => { await loadSequence(); applyFilters(); });
(async () => {
  const hash = /^#seq=(\d+)$/.exec(location.hash); // read before the first step rewrites it
  REC = await (await fetch(BASE + '/recording')).json();
  for (const a of REC.header.actors) INFO.set(a.actor, a);
  invariantAt = REC.entries.findIndex((e) => e.kind === 'invariant');
  document.getElementById('goto-incident').disabled = invariantAt < 0;
  if (invariantAt >= 0) {
    const step = REC.entries[invariantAt].step;
    causeAt = step === null || step === undefined ? invariantAt - 1 : REC.entries.findIndex((e) => e.seq === step);
  }
  document.getElementById('goto-cause').disabled = causeAt < 0;
  document.getElementById('rec-reason').textContent = REC.header.reason + ' \u00B7 ' + REC.entries.length + ' entries' + (REC.header.dropped ? ' (' + REC.header.dropped + ' older overwritten)' : '') + ' \u00B7 from ' + new Date(REC.header.timeOrigin + (REC.entries[0] ? REC.entries[0].t : 0)).toISOString();
  const params = new URLSearchParams(location.search);
  for (const name of ['request', 'key', 'actor']) if (params.get(name)) document.getElementById('f-' + name).value = params.get(name);
  await loadSequence();
  if (params.get('actor')) document.getElementById('f-actor').value = params.get('actor');
  if (filterQuery().toString()) await loadSequence();
  applyFilters();
  if (hash) { const i = REC.entries.findIndex((e) => e.seq === Number(hash[1])); const p = steps.indexOf(i); if (p >= 0) go(p); }
  redrawArrows();
  document.body.dataset.ready = 'true';
})();
`;

const LIVE_SEQUENCE_SCRIPT = `
document.getElementById('seq-draw').addEventListener('click', async () => { await loadSequence(); drawSequence(undefined); });
`;

const REPLAY_BAR = `<div id="replay">
  <div class="row"><strong>Recording</strong> <span id="rec-reason"></span></div>
  <div class="row">
    <button id="first" title="first entry">|&lt;</button><button id="step-back" title="previous entry (←)">&lt; step</button>
    <button id="play">Play</button><button id="step" title="next entry (→)">step &gt;</button><button id="last" title="last entry">&gt;|</button>
    <select id="speed" title="play speed"><option value="400">slow</option><option value="120" selected>normal</option><option value="20">fast</option></select>
    <input type="range" id="scrub" min="0" max="0" value="0">
    <button id="goto-incident">go to the incident</button><button id="goto-cause">go to the step that broke it</button>
  </div>
  <div class="row"><span id="step-info"></span></div>
  <div id="incident"></div>
  <ol id="log"></ol>
</div>`;

const SEQUENCE_CARD = `<div class="card" id="sequence-card">
  <h2>Sequence diagram (one request, one cache key or one actor)</h2>
  <div class="row">request id <input id="f-request" size="12"> cache key <input id="f-key" size="20">
    actor <select id="f-actor"><option value="">(any actor)</option></select>
    <button id="seq-draw">draw</button> <button id="seq-export">Mermaid text</button></div>
  <div id="sequence"></div>
  <textarea id="mermaid" readonly hidden></textarea>
</div>`;

function classRows(): string {
  return ['interactive', 'high', 'normal', 'low']
    .map(
      (c) =>
        `<tr><td>${c}</td><td id="sem-q-${c}">–</td><td><span class="bar" id="sem-bar-${c}" style="width:0"></span></td></tr>`,
    )
    .join('');
}

export interface PageOptions {
  /** Serve the page over a recording (`audio-proxy replay`): a scrubber instead of the stream. */
  readonly replay?: boolean;
}

/** The whole document for `charts`. */
export function renderPage(charts: readonly ChartModel[], options: PageOptions = {}): string {
  const data = JSON.stringify(charts).replace(/</g, '\\u003c');
  const replay = options.replay === true;
  const title = replay ? 'audio-proxy · replay' : 'audio-proxy · live actors';
  const base = `const BASE = location.pathname.replace(/\\/+$/, '');`;
  const script = replay
    ? `${base}${SCRIPT}${SEQUENCE_SCRIPT}${REPLAY_SCRIPT}`
    : `${base}${SCRIPT}${SEQUENCE_SCRIPT}${LIVE_SEQUENCE_SCRIPT}${LIVE_SCRIPT}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>${STYLE}</style>
</head>
<body data-ended-ms="${ENDED_VISIBLE_MS}" data-feed-lines="${FEED_LINES}">
<header><h1>${title}</h1><span id="conn" data-state="connecting">connecting…</span></header>
${replay ? REPLAY_BAR : ''}
<div class="cards">
  <div class="card" id="card-semaphore">
    <h2>Render slots (semaphore)</h2>
    <div>held <span class="big" id="sem-held">–</span> / <span id="sem-capacity">–</span>
      · queued <span class="big" id="sem-queued">–</span> / <span id="sem-queueSize">–</span></div>
    <table><thead><tr><th>class</th><th>queued</th><th></th></tr></thead><tbody>${classRows()}</tbody></table>
    <div>holders: <span id="sem-holders"></span></div>
    <div>waiters: <span id="sem-waiters"></span></div>
    <div>probe slots: <span id="probe-held">–</span> / <span id="probe-capacity">–</span> · readiness: <span id="readiness">–</span></div>
  </div>
  <div class="card" id="card-renders">
    <h2>Render coordinators by key</h2>
    <table><thead><tr><th>key</th><th>variant</th><th>coordinator</th><th>render</th><th>subscribers</th><th>bytes</th></tr></thead><tbody id="renders"></tbody></table>
  </div>
  <div class="card" id="card-pools">
    <h2>Worker pools (supervisors)</h2>
    <table><thead><tr><th>pool</th><th>state</th><th>gen</th><th>tasks</th><th>restarts</th><th>healthy</th></tr></thead><tbody id="pools"></tbody></table>
  </div>
  <div class="card" id="card-room"><h2>Waiting room</h2><div id="room">–</div></div>
</div>
<div id="charts"></div>
${SEQUENCE_CARD}
<div class="card"><h2>Telemetry feed (diagnostics channels, newest first)</h2><ol id="feed"></ol></div>
<script type="application/json" id="chart-data">${data}</script>
<script>${script}</script>
</body>
</html>
`;
}
