"""report.html's stack panel in the browser: its style and its script, inlined into the page after the page's own.

The script reads the form (lab/report/html_stack.py) or the page's address, hides the fault columns that cannot
happen to the stack and marks n/a the cells that cannot happen to their lock, recounts each family's summary
cell over the faults left, and answers for the stack under the summary: for each need, the qualifying locks ranked,
and the store findings that concern it. Its two ports of Python sit next to a comment naming what they mirror:
happens() (lab/exposure.py) and the comparison (lab/report/decide.py, lab/report/standing.py); the browser tests
hold them to `advise(run, stack)` (lab/report/advice.py) on the same run.
"""

from __future__ import annotations

STACK_STYLE = """
.stack-panel { margin: .3em 0; font-size: 14px; }
.stack-panel summary { cursor: pointer; font-weight: 600; }
.stack-panel summary span { font-weight: 400; }
#stack-form { display: flex; flex-wrap: wrap; gap: .3em .8em; align-items: flex-start; margin: .3em 0; }
#stack-form fieldset { border: 1px solid #e0e0e0; padding: .1em .5em .3em; margin: 0; display: flex;
  flex-wrap: wrap; gap: .1em .6em; max-width: 46em; }
#stack-form fieldset[data-off] label:not(legend label) { color: #9e9e9e; }
#stack-form legend { font-weight: 600; }
#stack-form .hint { color: #616161; font-size: 13px; flex-basis: 100%; }
#stack-form .note { color: #b71c1c; flex-basis: 100%; }
.stack-out { display: none !important; }
td.cell[data-masked] { color: #757575; font-style: italic; }
#stack-answer { font-size: 14px; margin: .6em 0; }
#stack-answer h2 { font-size: 17px; margin: .4em 0 .2em; } #stack-answer h3 { font-size: 15px; margin: .6em 0 .1em; }
#stack-answer ol, #stack-answer ul { margin: .1em 0; } #stack-answer p { margin: .2em 0; }
#stack-answer h3 span, #stack-answer .unproven, #stack-answer .failed { color: #616161; font-weight: 400; }
"""

STACK_SCRIPT = r"""
(function () {
  "use strict";
  const form = document.getElementById("stack-form"), block = document.getElementById("stack-data");
  if (!form || !block) return;
  const panel = document.getElementById("stack-panel"), answer = document.getElementById("stack-answer");
  const summary = document.getElementById("stack-summary"), everyStack = summary.textContent;
  const UNKNOWN = "unknown";  // a trait left unknown (lab/stack.py Unknown)
  let D = null;
  const ready = window.locklabInflate(block.textContent).then(data => {
    D = data;
    D.trait = Object.fromEntries(D.traits.map(([name, service, within, says]) =>
      [name, {service: service, within: within, says: Object.fromEntries(says)}]));
    D.byRow = new Map(D.rows.map(([backend, services, lock, needs, cost, cells]) =>
      [backend, {backend, services, lock, needs, cost, cells}]));
    D.column = new Map(D.columns.map((c, i) => [c[0] + "\n" + c[1], i]));
  });
  const el = window.locklabEl;  // an element with its attributes and children (lab/report/html_assets.py)
  const boxes = Array.from(form.querySelectorAll('input[name="stack"]'));
  const selects = Array.from(form.querySelectorAll("select"));
  const select = name => selects.find(s => s.name === name);
  // Which lists count: their service ticked and, for a trait within another (Patroni's), that one's value set.
  function enable() {
    for (const box of boxes) {
      const fieldset = box.closest("fieldset");
      if (box.checked) fieldset.removeAttribute("data-off"); else fieldset.setAttribute("data-off", "");
    }
    for (const s of selects) {
      const service = s.closest("fieldset").dataset.service, within = D && D.trait[s.name].within;
      s.disabled = !boxes.find(b => b.value === service).checked ||
                   Boolean(within && (select(within[0]).disabled || select(within[0]).value !== within[1]));
    }
  }
  // The stack the form describes, as lab/stack_choices.py stack_of takes it: services, and each trait's value.
  function chosen() {
    const values = {};
    for (const s of selects) if (!s.disabled && s.value) values[s.name] = s.value;
    return {services: boxes.filter(b => b.checked).map(b => b.value), values: values};
  }
  // As lab/stack_choices.py to_query writes it (and from_query reads it back).
  function query(stack) {
    const params = new URLSearchParams();
    params.set("stack", stack.services.join(","));
    for (const s of selects) if (stack.values[s.name]) params.set(s.name, stack.values[s.name]);
    return "?" + params.toString().replace(/%2C/g, ",");
  }
  function fromAddress() {
    const params = new URLSearchParams(location.search), wrong = [];
    if (!params.has("stack")) return null;
    const services = params.get("stack").split(",").filter(Boolean);
    for (const box of boxes) box.checked = services.includes(box.value);
    wrong.push(...services.filter(s => !boxes.some(b => b.value === s)));
    for (const s of selects) s.value = "";
    for (const [key, value] of params) {
      if (key === "stack") continue;
      const s = select(key);
      if (s && Array.from(s.options).some(o => o.value === value && value)) s.value = value;
      else wrong.push(key + "=" + value);
    }
    enable();
    return wrong;
  }

  // Mirrors lab/exposure.py read_trait() on the stack lab/stack_choices.py stack_of() builds: the trait's value,
  // UNKNOWN, or null where the part it belongs to is absent (TraitInfo.within: Patroni's settings without Patroni).
  function read(stack, trait) {
    const within = D.trait[trait].within;
    if (within) {
      const parent = read(stack, within[0]);
      if (parent === UNKNOWN) return UNKNOWN;
      if (parent !== within[1]) return null;
    }
    return stack.values[trait] || UNKNOWN;
  }
  // Mirrors lab/exposure.py happens(): whether a column's fault can happen to a lock living on `services`:
  // [verdict "yes" | "unknown" | "no", the conditions left open, in words].
  function happens(column, services, stack) {
    const [, , , conditions, strikes] = column;
    if (conditions === null) return ["yes", []];
    if (strikes !== null && !strikes.some(s => services.includes(s))) return ["no", []];
    const open = [];
    for (const [trait, anyOf] of conditions) {
      const service = D.trait[trait].service;
      if (!services.includes(service)) continue;
      const words = anyOf.map(v => D.trait[trait].says[v]).join(" or ");
      const value = stack.services.includes(service) ? read(stack, trait) : UNKNOWN;
      if (value === UNKNOWN) {
        open.push(words + ": " + (stack.services.includes(service) ? "left unknown in the stack panel" :
                                  "the stack does not describe its " + service));
      } else if (value === null || !anyOf.includes(value)) return ["no", []];
    }
    return [open.length ? "unknown" : "yes", open];
  }
  const outcome = cell => Array.isArray(cell) ? "kept" : D.outcomes[cell];
  const NA = () => D.outcomes.indexOf("n/a");
  function masked(row, stack) {  // lab/report/advice.py StackView.masked: n/a where the fault cannot happen
    return row.cells.map((cell, i) => happens(D.columns[i], row.services || [], stack)[0] === "no" ? NA() : cell);
  }
  // Mirrors lab/report/standing.py Standing, over cells keyed by label as its dict is (a repeated label keeps its
  // first place and its last cell).
  function standing(backend, cells) {
    const faults = Object.fromEntries(D.outcomes.map(o => [o, []]));
    let keptTrials = 0, weakest = null, weak = false;
    for (const [label, cell] of cells) {
      faults[outcome(cell)].push(label);
      if (outcome(cell) !== "kept") continue;
      keptTrials += cell[0];
      if (weakest === null || (cell[1] || 1) > (weakest[1][1] || 1)) weakest = [label, cell];  // max(): the first
      if (!cell[2]) weak = true;
    }
    return {backend, faults, keptTrials, weakest, weak, size: cells.size};
  }
  // Mirrors lab/report/decide.py compare() and Comparison: failed_by, unproven, qualifies, evidence, ranked, closest.
  function compare(rows, candidates) {
    const faced = D.columns.map((c, i) => i).filter(i => candidates.some(b => outcome(rows[b][i]) !== "n/a"));
    const standings = new Map(candidates.map(b =>
      [b, standing(b, new Map(faced.map(i => [D.columns[i][2], rows[b][i]])))]));
    const failedBy = new Map();
    for (const s of standings.values()) {
      for (const label of s.faults.failed) failedBy.set(label, (failedBy.get(label) || []).concat([s.backend]));
    }
    const unproven = b => standings.get(b).faults.unknown.filter(l => (failedBy.get(l) || []).some(o => o !== b));
    const qualifies = b => {
      const s = standings.get(b);
      return !s.faults.failed.length && s.faults.kept.length > 0 && !unproven(b).length;
    };
    const key = s => [s.faults.unknown.length, s.weak ? 1 : 0, -s.faults.kept.length, -s.keptTrials,
                      (D.byRow.get(s.backend).services || []).length, s.backend];
    const before = (a, b) => { for (let i = 0; i < a.length; i++) { if (a[i] < b[i]) return -1; if (a[i] > b[i]) return 1; } return 0; };
    const ranked = Array.from(standings.values()).filter(s => qualifies(s.backend))
      .sort((a, b) => before(key(a), key(b)));
    const closeness = s => [s.faults.kept.length - s.faults.failed.length, -s.faults.unknown.length, s.backend];
    const closest = Array.from(standings.values()).reduce((best, s) =>  // max(): the first of the greatest
      best === null || before(closeness(s), closeness(best)) > 0 ? s : best, null);
    return {standings, unproven, ranked, closest};
  }
  const inStack = (row, stack) => row.services !== null && row.services.every(s => stack.services.includes(s));
  // lab/report/advice.py need_answers(): the locks this stack can run, compared for each need they can serve.
  function needAnswers(stack) {
    const runnable = D.rows.map(r => D.byRow.get(r[0]))
      .filter(r => r.backend !== D.control && !r.backend.includes("@") && inStack(r, stack));
    const rows = Object.fromEntries(runnable.map(r => [r.backend, masked(r, stack)]));
    const out = [];
    D.needs.forEach(([title, namesServices], i) => {
      const able = runnable.filter(r => r.needs.includes(i)).map(r => r.backend);
      if (!able.length) return;
      const services = Array.from(new Set(able.map(b => D.byRow.get(b).lock))).sort();
      const comparison = compare(rows, able);
      out.push({index: i, title: namesServices && services.length ? `${title} (${services.join(", ")})` : title,
                able, comparison, faults: comparison.standings.get(able[0]).size});
    });
    return out;
  }
  // lab/report/advice.py exposures(): a column shows when it can happen to a lock the stack can run (its cell not
  // n/a by the lock's own declaration): "yes", "unknown", or null (hidden).
  function exposures(stack) {
    const faced = D.rows.map(r => D.byRow.get(r[0])).filter(r => !r.backend.includes("@") && inStack(r, stack));
    return D.columns.map((column, i) => {
      const found = faced.filter(r => outcome(r.cells[i]) !== "n/a").map(r => happens(column, r.services, stack)[0]);
      return found.includes("yes") ? "yes" : found.includes("unknown") ? "unknown" : null;
    });
  }

  const bound = b => "≤" + ((b || 1) * 100).toFixed(0) + "%";
  const plural = (n, word) => n + " " + word + (n === 1 ? "" : "s");
  function keptLine(s, comparison) {
    const row = D.byRow.get(s.backend), w = s.weakest;
    const counts = ["kept", "failed", "unknown", "store"].map(o => o + " " + s.faults[o].length).join(" · ");
    const weakest = w ? `weakest ✓ ${w[0]} (n=${w[1][0]}, ${bound(w[1][1])}${w[1][2] ? "" : ", weak"})` : "no ✓";
    return el("li", {"data-backend": s.backend, "data-kept": s.faults.kept.length, "data-failed": s.faults.failed.length,
                     "data-unknown": s.faults.unknown.length, "data-weakest": w ? w[0] : ""},
      [el("code", {}, s.backend), `: ${counts}, on ${plural(s.keptTrials, "exercised trial")}; ${weakest}. ` +
       `Cost ${row.cost}.`]);
  }
  function render(stack, shown) {
    const parts = [el("h2", {}, "For this stack")];
    const exposed = shown.filter(Boolean).length, may = shown.filter(h => h === "unknown").length;
    const outside = D.rows.filter(r => r[0] !== D.control && !r[0].includes("@") && r[1] !== null &&
                                       !inStack(D.byRow.get(r[0]), stack)).length;
    parts.push(el("p", {class: "exposure"}, `Exposed to ${exposed} of the run's ${D.columns.length} faults` +
      (may ? ` (${may} only may be: they depend on a fact left unknown)` : "") + `; the grids hide the other ` +
      `${D.columns.length - exposed}` + (outside ? ` and the ${plural(outside, "lock")} needing a service the stack ` +
      "does not run" : "") + ". The decision page below answers for every stack."));
    parts.push(el("details", {}, [el("summary", {}, "the faults it is exposed to"),
      el("ul", {class: "exposed"}, D.columns.flatMap((c, i) => shown[i] ? [el("li",
        {"data-scenario": c[0], "data-variant": c[1], "data-happens": shown[i]},
        c[2] + (shown[i] === "unknown" ? " (may)" : ""))] : []))]));
    for (const need of needAnswers(stack)) {
      const c = need.comparison;
      const section = el("div", {class: "stack-need", "data-need": need.index, "data-title": need.title,
                                 "data-candidates": need.able.length, "data-faults": need.faults},
        [el("h3", {}, [need.title + " ", el("span", {},
          `(${plural(need.able.length, "candidate")} over ${plural(need.faults, "fault")})`)])]);
      const near = c.closest, nearFailed = near ? near.faults.failed.length : 0;
      section.append(c.ranked.length ? el("ol", {}, c.ranked.map(s => keptLine(s, c))) :
                     el("p", {class: "none", "data-closest": near ? near.backend : ""},
                        "No lock measured here qualifies" + (near ? `; the closest is ${near.backend}` +
                        (nearFailed ? `: it failed under ${plural(nearFailed, "fault")} of this stack` :
                         c.unproven(near.backend).length ? `: it is unknown under ${c.unproven(near.backend).length} ` +
                         "that failed another candidate" : ": no fault took its right away") : "") + "."));
      for (const b of need.able) {
        const open = c.unproven(b);
        if (open.length && !c.standings.get(b).faults.failed.length) {
          section.append(el("p", {class: "unproven", "data-backend": b},
            `? ${b} is unproven: unknown under ${open.join("; ")}, which failed another candidate.`));
        }
      }
      const failed = need.able.filter(b => c.standings.get(b).faults.failed.length);
      if (failed.length) {
        section.append(el("p", {class: "failed"}, "Failed under a fault of this stack: " + failed.map(b =>
          `${b} (${c.standings.get(b).faults.failed.length})`).join(", ") + "."));
      }
      parts.push(section);
    }
    parts.push(el("h3", {}, "Store findings that concern this stack"));
    const found = storeAnswers(stack);
    parts.push(found.length ? el("ul", {class: "store"}, found) : el("p", {}, "None measured."));
    answer.replaceChildren(...parts);
    answer.hidden = false;
  }
  // lab/report/advice.py store_answers(): a finding shows when its fault can happen to the control on this stack.
  function storeAnswers(stack) {
    const control = D.byRow.get(D.control);
    if (!control) return [];
    return D.store.flatMap(([i, lost, n, charged, siblings]) => {
      const [verdict, open] = happens(D.columns[i], control.services || [], stack);
      if (verdict === "no") return [];
      const lines = siblings.map(([j, needs, trials, acknowledged, lostThere, ran, locksLost]) => {
        const has = {yes: "this stack has it", no: "this stack has not",
                     unknown: "whether this stack has it is unknown"}[happens(D.columns[j], control.services || [], stack)[0]];
        const what = lostThere ? `the control lost an acknowledged write in ${lostThere} of ${plural(trials, "trial")}` :
          acknowledged ? `the control lost none of the ${acknowledged} writes acknowledged in its ${plural(trials, "trial")}` :
          `the control's ${plural(trials, "trial")} had no write acknowledged`;
        return el("li", {}, `measured against it: ${D.columns[j][2]}${needs.length ? " (" + needs.join("; ") + ")" : ""}` +
                            `: ${what}; ${locksLost} of the ${ran} locks that ran it lost one; ${has}.`);
      });
      return [el("li", {"data-scenario": D.columns[i][0], "data-variant": D.columns[i][1], "data-happens": verdict},
        [`◆ ${D.columns[i][2]}${verdict === "unknown" ? " (may concern it: " + open.join("; ") + ")" : ""}: the no-lock ` +
         `control lost an acknowledged write in ${lost} of ${n} trials, and ${plural(charged, "lock")} lost one the ` +
         "same way with their promise kept.", el("ul", {}, lines)])];
    });
  }

  const saved = new Map();  // a node's own text and class, put back when no stack is chosen
  function keep(node) { if (!saved.has(node)) saved.set(node, [node.innerHTML, node.className, {...node.dataset}]); }
  function restore(node) {
    if (!saved.has(node)) return;
    const [html, cls, data] = saved.get(node), open = node.classList.contains("open");
    node.innerHTML = html; node.className = cls;
    node.classList.toggle("open", open);  // a family opened, a cell shown meanwhile
    for (const key of Object.keys(node.dataset)) if (!(key in data)) delete node.dataset[key];
    Object.assign(node.dataset, data);
    saved.delete(node);
  }
  const columnOf = node => D.column.get(node.dataset.scenario + "\n" + node.dataset.variant);
  // The grids as the stack sees them: columns that cannot happen hidden, cells that cannot happen to their lock
  // n/a, each family's summary cell recounted over the faults left, rows of locks it cannot run hidden.
  function applyGrids(stack, shown) {
    for (const node of document.querySelectorAll("table[data-grid] [data-scenario]")) {
      const i = columnOf(node);
      if (i === undefined) continue;
      node.classList.toggle("stack-out", Boolean(stack) && !shown[i]);
      if (node.tagName !== "TD") continue;
      const row = D.byRow.get(node.dataset.backend);
      const na = Boolean(stack) && Boolean(shown[i]) && Boolean(row) &&
                 happens(D.columns[i], row.services || [], stack)[0] === "no";
      if (na && !node.hasAttribute("data-masked")) {
        keep(node);
        node.classList.remove("mark-" + node.dataset.mark);
        node.classList.add("mark-NOT_APPLICABLE");
        node.dataset.masked = node.dataset.mark;
        node.textContent = "n/a: cannot happen to this stack";
      } else if (!na && node.hasAttribute("data-masked")) {
        const out = node.classList.contains("stack-out");
        restore(node);
        node.classList.toggle("stack-out", out);
      }
    }
    const severity = D.marks.map(m => m[0]), sign = Object.fromEntries(D.marks);
    for (const table of document.querySelectorAll("table.summary")) {
      for (const head of table.querySelectorAll("th.family")) {
        const family = head.dataset.family;
        const left = Array.from(table.querySelectorAll(`thead th.fault[data-family="${family}"]`))
          .filter(th => !th.classList.contains("stack-out")).length;
        const count = head.querySelector(".faults");
        if (!stack) { restore(count); head.classList.remove("stack-out"); } else {
          keep(count); count.textContent = left; head.classList.toggle("stack-out", left === 0);
        }
        for (const cell of table.querySelectorAll(`td.family-cell[data-family="${family}"]`)) {
          if (!stack) { restore(cell); continue; }
          keep(cell);
          const counts = new Map();
          for (const td of cell.parentElement.querySelectorAll(`td.fault[data-family="${family}"]:not(.stack-out)`)) {
            const mark = td.hasAttribute("data-masked") ? "NOT_APPLICABLE" : td.dataset.mark;
            counts.set(mark, (counts.get(mark) || 0) + 1);
          }
          const marks = Array.from(counts.keys()).sort((a, b) => severity.indexOf(a) - severity.indexOf(b));
          const worst = marks.length ? marks[0] : "NOT_APPLICABLE";  // lab/report/fault_groups.py FamilyCell
          cell.textContent = marks.length && !(marks.length === 1 && worst === "NOT_APPLICABLE") ?
            marks.map(m => sign[m] + " " + counts.get(m)).join(" · ") : sign.NOT_APPLICABLE;
          cell.className = cell.className.replace(/mark-\w+/, "mark-" + worst);
          cell.dataset.worst = worst;
          cell.classList.toggle("stack-out", left === 0);
        }
      }
    }
    const fit = new Set();
    if (stack) for (const need of needAnswers(stack)) for (const s of need.comparison.ranked) fit.add(s.backend);
    for (const tr of document.querySelectorAll("table[data-grid] tbody tr[data-backend]")) {
      const row = D.byRow.get(tr.dataset.backend);
      const out = Boolean(stack) && Boolean(row) && row.backend !== D.control && row.services !== null &&
                  !inStack(row, stack);
      if (out) tr.dataset.stack = "out"; else delete tr.dataset.stack;
      if (stack) {  // ★ for the locks that qualify for a need over this stack's faults
        if (!("qualifiesAll" in tr.dataset)) tr.dataset.qualifiesAll = tr.dataset.qualifies;
        tr.dataset.qualifies = fit.has(tr.dataset.backend) ? "yes" : "no";
      } else if ("qualifiesAll" in tr.dataset) {
        tr.dataset.qualifies = tr.dataset.qualifiesAll;
        delete tr.dataset.qualifiesAll;
      }
    }
    if (window.locklabFilter) window.locklabFilter();
  }
  function describe(stack) {
    if (!stack.services.length) return "no service ticked";
    return stack.services.map(service => {
      const set = Object.entries(stack.values).filter(([t]) => D.trait[t].service === service)
        .map(([t, v]) => t.slice(service.length + 1) + " " + v);
      return service + (set.length ? " (" + set.join(", ") + ")" : "");
    }).join("; ");
  }
  function apply(stack, note) {
    const shown = stack ? exposures(stack) : null;
    applyGrids(stack, shown);
    const old = form.querySelector(".note");
    if (old) old.remove();
    if (note && note.length) form.append(el("p", {class: "note"}, "The address names what this page does not know, " +
                                               "left out: " + note.join(", ") + "."));
    if (!stack) {
      answer.hidden = true; answer.replaceChildren(); summary.textContent = everyStack;
      form.dataset.applied = "";
      return;
    }
    render(stack, shown);
    summary.textContent = describe(stack) + `: exposed to ${shown.filter(Boolean).length} of ` +
                          `${D.columns.length} faults`;
    form.dataset.applied = query(stack);
  }
  form.addEventListener("change", () => ready.then(() => {
    enable();
    const stack = chosen();
    history.replaceState(null, "", query(stack) + location.hash);
    apply(stack);
  }));
  document.getElementById("stack-reset").addEventListener("click", () => ready.then(() => {
    for (const box of boxes) box.checked = false;
    for (const s of selects) s.value = "";
    enable();
    history.replaceState(null, "", location.pathname + location.hash);
    apply(null);
  }));
  ready.then(() => {
    const wrong = fromAddress();
    enable();
    if (wrong === null) { form.dataset.applied = ""; return; }
    panel.open = true;
    apply(chosen(), wrong);
  }).catch(error => {
    form.append(el("p", {class: "note"}, "This browser cannot read the page's data (it needs DecompressionStream: " +
                                         "Chromium 80, Firefox 113, Safari 16.4 or later): " + error));
  });
})();
"""

__all__ = ["STACK_SCRIPT", "STACK_STYLE"]
