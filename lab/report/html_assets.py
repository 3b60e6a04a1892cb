"""report.html's stylesheet and script, inlined into the page (it fetches nothing).

The script reads a cell's data only when the cell is opened (its block of CELLS_PER_BLOCK cells, gzipped JSON), draws its timeline as SVG
from the geometry lab/report/html_data.py computed, attaches a picture's PNG only when it scrolls into view,
opens a family of faults into its columns, and moves between a grid's cells with the arrow keys (Enter opens,
Escape closes). Everything it shows from the data is set as text, never parsed as HTML.
"""

from __future__ import annotations

import json
import string

from lab.report import html_data
from lab.report.html_data import TIMELINE_LEGEND


def style() -> str:
    """The page's CSS; a cell's colour is its mark's in the matrix chart (lab/report/charts.py), so the page
    reads like matrix.png."""
    from lab.report.charts import MARK_COLOURS, OTHER_COLOUR

    marks = "\n".join(f"td.mark-{name} {{ border-left-color: {colour}; "
                       f"background: color-mix(in srgb, {colour} 14%, white); }}"
                       for name, (colour, _) in MARK_COLOURS.items())
    colours = {"other": OTHER_COLOUR, "failed": MARK_COLOURS["FAILED"][0], "kept": MARK_COLOURS["KEPT"][0]}
    return STYLE.substitute(colours) + marks + "\n"


STYLE = string.Template("""
body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #212121; background: #fff; }
main { max-width: 1200px; margin: 0 auto; padding: 0 1.5em 4em; }
nav.files { position: sticky; top: 0; background: #fafafa; border-bottom: 1px solid #e0e0e0; padding: .4em 1.5em;
  z-index: 5; font-size: 14px; }
#tool { padding: .2em 1.5em 1em; border-bottom: 2px solid #e0e0e0; }
#tool h1 { font-size: 19px; margin: .3em 0 .1em; }
section { border-bottom: 2px solid #e0e0e0; padding-bottom: 1em; }
main > section { content-visibility: auto; contain-intrinsic-size: auto 3000px; }  /* laid out when scrolled to */
h1, h2, h3 { line-height: 1.25; } h2 { margin-top: 1.8em; }
code { font: 13px ui-monospace, monospace; background: #f5f5f5; padding: 0 .2em; border-radius: 3px; }
pre { background: #f5f5f5; padding: .6em; overflow-x: auto; } pre code { padding: 0; }
table { border-collapse: collapse; margin: .8em 0; font-size: 13px; }
th, td { border: 1px solid #e0e0e0; padding: .25em .45em; vertical-align: top; text-align: left; }
thead th { background: #f5f5f5; }
img { max-width: 100%; height: auto; }
.grid-scroll { overflow: auto; max-height: calc(100vh - 9em); border: 1px solid #e0e0e0; margin: .6em 0; }
.summary-scroll { max-height: calc(100vh - 12.5em); }
#tool p.lead { margin: .2em 0; font-size: 14px; }
.filters select { max-width: 24em; }
table.matrix { margin: 0; font-size: 12px; border-collapse: separate; border-spacing: 0; }
table.matrix th, table.matrix td { border-width: 0 1px 1px 0; }
table.matrix caption { text-align: left; font-weight: 600; padding: .3em .45em; }
table.matrix thead th { position: sticky; top: 0; z-index: 2; min-width: 6em; background: #f5f5f5; }
table.matrix thead th.corner { left: 0; z-index: 3; }
table.matrix tbody th { position: sticky; left: 0; z-index: 1; background: #fff; white-space: nowrap; }
table.matrix th.family button { font: inherit; font-weight: 600; border: 0; background: none; cursor: pointer;
  padding: 0; white-space: nowrap; }
table.matrix th.family button::after { content: " ▸"; color: #757575; }
table.matrix th.family button[aria-expanded="true"]::after { content: " ◂"; }
table.matrix th.family .faults { color: #757575; font-weight: 400; font-size: 11px; }
table.matrix th.fault { font-weight: 400; background: #eceff1; max-width: 12em; }
td.family-cell { cursor: pointer; white-space: nowrap; border-left: 4px solid $other; font-weight: 600; }
td.family-cell.open { box-shadow: inset 0 -3px 0 #1565c0; }
td.cell { cursor: pointer; min-width: 7em; max-width: 16em; border-left: 4px solid $other; background: #fafafa; }
td.cell.fault { background-image: linear-gradient(#0000000a, #0000000a); }
td[tabindex]:hover, td[tabindex]:focus, td.cell.open { outline: 2px solid #1565c0; outline-offset: -2px; }
.filters { margin: .3em 0; display: flex; flex-wrap: wrap; gap: .4em 1.2em; align-items: center; font-size: 14px; }
.filters .hint { color: #616161; font-size: 13px; }
.fit { display: none; color: $kept; margin-left: .3em; }
body.need-chosen tr[data-qualifies="yes"] .fit { display: inline; }
p.pointer { font-style: italic; }
#panel { position: fixed; top: 0; right: 0; bottom: 0; width: min(780px, 94vw); overflow: auto; background: #fff;
  border-left: 1px solid #bdbdbd; box-shadow: -4px 0 16px #0002; padding: 1em 1.2em 3em; z-index: 6; }
#panel-close { position: sticky; top: 0; float: right; font-size: 22px; border: 0; background: #fff; cursor: pointer; }
#panel h2 { margin-top: 0; } #panel details { border-top: 1px solid #e0e0e0; padding: .4em 0; }
#panel summary { cursor: pointer; font-weight: 600; }
#panel table { font-size: 12px; } #panel td.value { font-family: ui-monospace, monospace; word-break: break-word; }
#panel tr.proof td { background: #fff3e0; }
svg.timeline { display: block; max-width: 100%; height: auto; border: 1px solid #e0e0e0; background: #fff; }
svg.timeline text { font: 10px system-ui, sans-serif; fill: #424242; }
figure.timeline { margin: .6em 0; min-height: 120px; }
.verdict-unsafe, .missing { color: $failed; } .verdict-safe { color: $kept; }
""")


def script() -> str:
    """The page's script, with the timeline legend's words and colours (the PNG's own) and the cells a data block
    holds filled in."""
    return SCRIPT.replace("/*LEGEND*/[]", json.dumps(TIMELINE_LEGEND)).replace("/*CELLS*/0",
                                                                                str(html_data.CELLS_PER_BLOCK))


SCRIPT = r"""
(function () {
  "use strict";
  const panel = document.getElementById("panel"), body = document.getElementById("panel-body");
  const LEGEND = /*LEGEND*/[];
  const CELLS = /*CELLS*/0;  // cells a data block holds: block k, cells k * CELLS onwards (lab/report/html_data.py)
  const blocks = new Map();
  async function inflate(text) {  // a block's base64 of gzipped JSON, as lab/report/html_data.py packed() wrote it
    const bytes = Uint8Array.from(atob(text.trim()), ch => ch.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }
  function cellData(index) {  // a promise of a cell's data; its block is read the first time one of its cells is
    const block = Math.floor(index / CELLS);
    if (!blocks.has(block)) blocks.set(block, inflate(document.getElementById("cells-" + block).textContent));
    return blocks.get(block).then(cells => cells[index % CELLS]);
  }
  window.locklabCell = cellData;  // for a console, and the browser tests
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) { if (v !== null && v !== undefined) node.setAttribute(k, v); }
    for (const child of [].concat(children === undefined ? [] : children)) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const NS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = String(text);
    return node;
  }
  function ticks(end) {
    const raw = end / 5, power = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    const step = [1, 2, 5, 10].map(m => m * power).find(s => s >= raw) || power;
    const out = [];
    for (let t = 0; t <= end * 1.0001; t += step) out.push(Number(t.toFixed(6)));
    return out;
  }
  // A trial's timeline as SVG: one lane per process, top first; bars, fault windows and points as
  // lab/report/history_chart.py draws them in the PNG.
  function drawTimeline(line, title) {
    const laneH = 26, left = 96, right = 18, top = 24, width = 720, plotW = width - left - right;
    const clocks = line.clocks ? Object.entries(line.clocks) : [];
    const lanesH = line.lanes.length * laneH, clockH = clocks.length ? 96 : 0;
    const legendTop = top + lanesH + 52 + clockH, height = legendTop + 14 * Math.ceil(LEGEND.length / 2) + 6;
    const x0 = -line.end * 0.03, x1 = line.end * 1.05;
    const X = t => left + (t - x0) / (x1 - x0) * plotW, Y = lane => top + lane * laneH + laneH / 2;
    const root = svg("svg", {class: "timeline", viewBox: `0 0 ${width} ${height}`, width: width, height: height,
                              role: "img", "aria-label": "timeline of " + title});
    root.append(svg("text", {x: left, y: 14}, title));
    for (const [start, stop] of line.windows || []) {
      root.append(svg("rect", {x: X(start), y: top, width: Math.max(1, X(stop) - X(start)), height: lanesH,
                               fill: LEGEND[2][1], "fill-opacity": 0.6}));
    }
    for (const t of ticks(line.end)) {
      root.append(svg("line", {x1: X(t), x2: X(t), y1: top, y2: top + lanesH, stroke: "#e0e0e0", "stroke-width": 0.6}));
      root.append(svg("text", {x: X(t), y: top + lanesH + 13, "text-anchor": "middle"}, t));
    }
    root.append(svg("text", {x: left + plotW / 2, y: top + lanesH + 28, "text-anchor": "middle"},
                    "seconds (the trial's own clock)"));
    line.lanes.forEach((lane, i) => root.append(svg("text", {x: left - 6, y: Y(i) + 4, "text-anchor": "end"}, lane)));
    for (const [lane, what, start, stop, colour] of line.bars || []) {
      let attrs;
      if (what === "right") {
        attrs = {y: Y(lane) - 0.35 * laneH, height: 0.7 * laneH, "fill-opacity": 0.5, width: X(stop) - X(start)};
      } else if (what === "lease") {
        attrs = {y: Y(lane) - 0.35 * laneH, height: 0.1 * laneH, width: X(stop) - X(start)};
      } else {
        attrs = {y: Y(lane) - 0.05 * laneH, height: 0.3 * laneH,
                 width: Math.max(X(stop) - X(start), plotW * 0.004)};
      }
      const bar = svg("rect", {x: X(start), fill: colour, ...attrs});
      bar.append(svg("title", {}, `${line.lanes[lane]}: ${what} ${start}–${stop} s`));
      root.append(bar);
    }
    for (const [lane, f, t, count] of line.points || []) {
      if (f === "observe") {
        root.append(svg("text", {x: X(t), y: Y(lane) + 4, "text-anchor": "middle", fill: "#616161"}, count ?? ""));
      } else {
        root.append(svg("text", {x: X(t), y: Y(lane) - 0.2 * laneH, "text-anchor": "middle", fill: "#6a1b9a"}, "★"));
      }
    }
    if (clocks.length) {
      const y0 = top + lanesH + 40, h = clockH - 12;
      const values = clocks.flatMap(([, points]) => points.map(p => p[1])).concat([0]);
      const lo = Math.min(...values), hi = Math.max(...values), span = (hi - lo) || 1;
      const V = v => y0 + h - (v - lo) / span * h;
      root.append(svg("line", {x1: left, x2: left + plotW, y1: V(0), y2: V(0), stroke: "#424242",
                               "stroke-dasharray": "4 3", "stroke-width": 0.8}));
      root.append(svg("text", {x: left - 6, y: V(0) + 4, "text-anchor": "end"}, "clock offset"));
      const colours = ["#6a1b9a", "#00838f", "#ef6c00", "#5d4037"];
      clocks.forEach(([name, points], i) => {
        let d = "";
        points.forEach(([t, v], j) => { d += (j ? ` H${X(t)} V${V(v)}` : `M${X(t)} ${V(v)}`); });
        root.append(svg("path", {d: d, fill: "none", stroke: colours[i % colours.length], "stroke-width": 1.4}));
        root.append(svg("text", {x: left + plotW - 4, y: y0 + 10 + 12 * i, "text-anchor": "end",
                                 fill: colours[i % colours.length]}, name + "'s clock"));
      });
    }
    LEGEND.forEach(([words, colour], i) => {
      const x = left + (i % 2) * 300, y = legendTop + 14 * Math.floor(i / 2);
      root.append(svg("rect", {x: x, y: y - 8, width: 10, height: 8, fill: colour}));
      root.append(svg("text", {x: x + 14, y: y}, words));
    });
    return root;
  }
  function words(value) {
    if (value === null || value === undefined) return "";
    if (typeof value !== "object") return String(value);
    if (Array.isArray(value)) return value.map(words).join(", ");
    return Object.entries(value)
      .map(([k, v]) => k + "=" + (typeof v === "object" && v !== null ? JSON.stringify(v) : v)).join(", ");
  }
  function pairs(object) {
    return el("table", {class: "pairs"}, [el("tbody", {}, Object.entries(object).map(([k, v]) =>
      el("tr", {}, [el("th", {}, k), el("td", {class: "value"}, words(v))])))]);
  }
  function historyTable(trial) {
    const proof = new Map();
    for (const [checker, , , , cited] of (trial.judgement && trial.judgement.findings) || []) {
      for (const i of cited || []) proof.set(i, (proof.has(i) ? proof.get(i) + ", " : "") + checker);
    }
    const rows = trial.history.map((op, i) => el("tr",
      proof.has(i) ? {class: "proof", title: "cited by " + proof.get(i)} : {},
      [el("td", {}, String(i)), el("td", {}, op[0].toFixed(4)), el("td", {}, op[1]), el("td", {}, op[2]),
       el("td", {}, op[3]), el("td", {class: "value"}, words(op[4]))]));
    return el("table", {class: "history", "data-trial": trial.id}, [
      el("thead", {}, [el("tr", {}, ["#", "time (s)", "process", "type", "f", "value"].map(h => el("th", {}, h)))]),
      el("tbody", {}, rows)]);
  }
  function trialSection(trial, open) {
    const head = [trial.id + ": ", el("span", {class: trial.safety ? "verdict-" + trial.safety : null},
      trial.status === "ok" ? (trial.verdict || "") : trial.status + (trial.reason ? ": " + trial.reason : ""))];
    const parts = [el("summary", {}, head)];
    const facts = {status: trial.status, run: trial.run};
    if (trial.safety) facts.safety = trial.safety;
    if (trial.exercised !== null && trial.exercised !== undefined) facts.exercised = trial.exercised;
    if (trial.reason) facts.reason = trial.reason;
    parts.push(pairs(facts));
    parts.push(el("h4", {}, "Evidence that the fault struck"));
    parts.push(trial.evidence ? pairs(trial.evidence) : el("p", {}, "none recorded in this trial's measures"));
    if (trial.judgement) {
      const j = trial.judgement;
      parts.push(el("h4", {}, "Judgement"));
      parts.push(pairs({kind: j.kind, safety: j.safety, lock: j.lock, exercised: j.exercised, figures: j.figures}));
      parts.push(el("table", {class: "findings"}, [
        el("thead", {}, [el("tr", {}, ["checker", "valid", "kind", "detail", "proof (history rows)"]
          .map(h => el("th", {}, h)))]),
        el("tbody", {}, (j.findings || []).map(([checker, valid, kind, detail, cited]) => el("tr", {}, [
          el("td", {}, checker), el("td", {}, valid), el("td", {}, kind || ""), el("td", {}, detail || ""),
          el("td", {}, (cited || []).join(", "))])))]));
    }
    if (trial.history) {
      parts.push(el("h4", {}, "History (" + trial.history.length + " operations)"));
      parts.push(historyTable(trial));
    } else if (trial.status === "ok") {
      parts.push(el("p", {}, "No history recorded (a schema 1 trial, or one that measures cost)."));
    }
    return el("details", open ? {open: "", "data-trial": trial.id} : {"data-trial": trial.id}, parts);
  }
  let current = null;
  async function show(td) {
    if (current) current.classList.remove("open");
    current = td; td.classList.add("open");
    let cell;
    try { cell = await cellData(Number(td.dataset.cell)); } catch (error) {
      body.replaceChildren(el("p", {}, "This browser cannot read the page's data (it needs DecompressionStream: " +
                                       "Chromium 80, Firefox 113, Safari 16.4 or later): " + error));
      panel.hidden = false;
      return;
    }
    if (current !== td) return;  // another cell was opened meanwhile
    const parts = [el("h2", {}, [cell.backend + " under " + cell.label]), el("p", {class: "mark"}, cell.text)];
    const pictured = cell.trials.find(t => t.id === cell.pictured);
    if (pictured && pictured.timeline) {
      const picture = drawTimeline(pictured.timeline, pictured.id);
      picture.setAttribute("data-trial", pictured.id);
      parts.push(el("div", {class: "picture"}, [
        el("p", {}, "Timeline of " + cell.pictured + (cell.mark === "FAILED" ? ", the cell's first failing trial" :
          ", the cell's first trial with a history") + "; every trial's history is in its table below."), picture]));
    }
    if (!cell.trials.length) parts.push(el("p", {}, "No trial of this backend ran under this fault."));
    const opened = cell.pictured || (cell.trials[0] && cell.trials[0].id);
    for (const trial of cell.trials) parts.push(trialSection(trial, trial.id === opened));
    body.replaceChildren(...parts);
    panel.hidden = false;
    panel.scrollTop = 0;
  }
  function hide() { panel.hidden = true; if (current) { current.classList.remove("open"); current.focus(); } }
  function toggleFamily(table, family, open) {
    const button = table.querySelector(`th.family button[data-family="${family}"]`);
    const opening = open === undefined ? button.getAttribute("aria-expanded") !== "true" : open;
    button.setAttribute("aria-expanded", String(opening));
    for (const node of table.querySelectorAll(`.fault[data-family="${family}"]`)) node.hidden = !opening;
    for (const node of table.querySelectorAll(`td.family-cell[data-family="${family}"]`)) {
      node.classList.toggle("open", opening);
    }
  }
  function focusCell(td) {
    const table = td.closest("table");
    for (const other of table.querySelectorAll('td[tabindex="0"]')) other.tabIndex = -1;
    td.tabIndex = 0;
    td.focus();
  }
  function neighbour(td, rows, columns) {
    if (columns) {
      let next = td;
      do { next = columns > 0 ? next.nextElementSibling : next.previousElementSibling; }
      while (next && (next.hidden || !next.hasAttribute("tabindex")));
      return next;
    }
    const all = Array.from(td.closest("tbody").rows).filter(row => !row.hidden);
    const row = all[all.indexOf(td.parentElement) + rows];
    return row ? row.cells[td.cellIndex] : null;
  }
  function activate(td) {
    if (td.classList.contains("family-cell")) toggleFamily(td.closest("table"), td.dataset.family);
    else if (td.dataset.cell !== undefined) show(td);
  }
  const MOVES = {ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0]};
  document.addEventListener("click", event => {
    const button = event.target.closest("th.family button");
    if (button) { toggleFamily(button.closest("table"), button.dataset.family); return; }
    const answer = event.target.closest("button.answer-cell[data-cell]");  // the answer's cell: the grid's data
    if (answer) { show(answer); return; }
    const td = event.target.closest("table[data-grid] td[tabindex]");
    if (td) { focusCell(td); activate(td); }
  });
  document.addEventListener("keydown", event => {
    if (event.key === "Escape") {
      if (!panel.hidden) { hide(); event.preventDefault(); return; }
      const fault = event.target.closest && event.target.closest("td.fault");
      if (fault) {  // Escape on a family's fault folds the family back, focus on its cell
        toggleFamily(fault.closest("table"), fault.dataset.family, false);
        focusCell(fault.parentElement.querySelector(`td.family-cell[data-family="${fault.dataset.family}"]`));
      }
      return;
    }
    const td = event.target.closest && event.target.closest("table[data-grid] td[tabindex]");
    if (!td) return;
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); activate(td); return; }
    const move = MOVES[event.key];
    if (!move) return;
    event.preventDefault();
    const next = neighbour(td, move[0], move[1]);
    if (next) focusCell(next);
  });
  document.getElementById("panel-close").addEventListener("click", hide);
  // A grid scrolls a focused cell clear of its sticky header row and backend column.
  for (const scroller of document.querySelectorAll(".grid-scroll")) {
    const head = scroller.querySelector("thead"), first = scroller.querySelector("tbody th");
    scroller.style.scrollPaddingTop = (head ? head.offsetHeight : 0) + "px";
    scroller.style.scrollPaddingLeft = (first ? first.offsetWidth : 0) + "px";
  }
  // Pictures: a PNG is attached, and a timeline drawn, when it comes near the screen.
  async function reveal(node) {
    if (node.dataset.png) {
      node.src = document.getElementById(node.dataset.png).textContent.trim();
      delete node.dataset.png;
    } else if (node.dataset.timelineCell !== undefined && !node.querySelector("svg")) {
      const cell = await cellData(Number(node.dataset.timelineCell));
      const trial = cell.trials.find(t => t.id === node.dataset.trial);
      if (trial && trial.timeline && !node.querySelector("svg")) node.append(drawTimeline(trial.timeline, trial.id));
    }
  }
  const lazy = document.querySelectorAll("img[data-png], figure[data-timeline-cell]");
  if ("IntersectionObserver" in window) {
    const watcher = new IntersectionObserver(entries => {
      for (const entry of entries) { if (entry.isIntersecting) { reveal(entry.target); watcher.unobserve(entry.target); } }
    }, {rootMargin: "600px"});
    lazy.forEach(node => watcher.observe(node));
  } else {
    lazy.forEach(reveal);
  }
  const family = document.getElementById("filter-family"), need = document.getElementById("filter-need");
  const count = document.getElementById("filter-count");
  function filter() {
    const rows = Array.from(document.querySelectorAll("table.matrix tbody tr"));
    const summary = Array.from(document.querySelectorAll("table.summary tbody tr"));
    for (const row of rows) {
      row.hidden = !((!family.value || row.dataset.families.split(" ").includes(family.value)) &&
                     (!need.value || row.dataset.needs.split(" ").includes(need.value)));
    }
    document.body.classList.toggle("need-chosen", Boolean(need.value));
    count.textContent = summary.filter(row => !row.hidden).length + " of " + summary.length + " backends shown";
  }
  if (family && need) {
    family.addEventListener("change", filter); need.addEventListener("change", filter); filter();
    window.locklabFilter = filter;
  }
})();
"""
