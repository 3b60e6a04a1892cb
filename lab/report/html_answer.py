"""report.html's first screen: each need's lock for every stack, and for each stack the page names.

Every answer is computed here, in Python, by the function `lab doctor --advise` and `lab report --stack` print
(lab/report/advice.py advise): the page shows the one chosen and decides nothing, so the decision has one
implementation. A stack the page does not name is answered by `lab doctor --advise` against your own servers.
A weakest deciding ✓ opens its trials as the grid's cells do (data-cell names the same cell data).
"""

from __future__ import annotations

from typing import Callable

from lab.report.advice import Advice, Kept, advise
from lab.report.markdown_html import attribute
from lab.report.sections import RunView
from lab.stack.choices import PANEL_STACKS, EVERY_STACK, NamedStack, stack_of, to_query
from lab.decision.strength import bound_text

CellFor = Callable[[str, str], "int | None"]  # (backend, fault label) -> the cell's index in the page's data
Inline = Callable[[str], str]
QUALIFIERS_SHOWN = 3  # the first, and the next two in ranking order


def _weakest(k: Kept, cell_for: CellFor, inline: Inline) -> str:
    if not k.weakest:
        return "no deciding ✓"
    words = f"{inline(f'*{k.weakest}*')}, n={k.weakest_n}, {bound_text(k.bound or 1.0)}{'' if k.strong else ', weak'}"
    index = cell_for(k.backend, k.weakest)
    if index is None:
        return words
    return f'<button type="button" class="answer-cell" data-cell="{index}">{words}</button>'


def answer_table(advice: Advice, cell_for: CellFor, inline: Inline) -> str:
    """One stack's answer: per need, the lock to use, the next qualifiers, its weakest deciding ✓ and its cost; where
    none qualifies, the decision's sentence (the closest and what ruled it out)."""
    rows = []
    for need in advice.needs:
        head = f'{inline(need.need)} <span class="hint">({need.candidates} candidates, {need.faults} faults)</span>'
        if not need.qualifying:
            rows.append(f'<tr><th scope="row">{head}</th><td colspan="4">{inline(need.verdict)}</td></tr>')
            continue
        first, rest = need.qualifying[0], need.qualifying[1:QUALIFIERS_SHOWN]
        then = ", ".join(inline(f"`{k.backend}`") for k in rest) or "no other qualifies"
        rows.append(f'<tr><th scope="row">{head}</th><td class="use" data-lock="{attribute(first.backend)}">'
                    f'{inline(f"`{first.backend}`")}<details><summary>why</summary>{inline(need.verdict)}</details></td>'
                    f'<td data-locks="{attribute(" ".join(k.backend for k in rest))}">{then}</td>'
                    f"<td>{_weakest(first, cell_for, inline)}</td><td>{inline(first.cost)}</td></tr>")
    return ('<table class="answer"><thead><tr><th>need</th><th>use</th><th>then</th>'
            "<th>its weakest deciding ✓ (opens its trials)</th><th>cost per company</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _section(view: RunView, named: NamedStack, cell_for: CellFor, inline: Inline, shown: bool) -> str:
    advice = advise(view, stack_of(named.services, named.values))
    exposed = len(advice.exposed)
    return (f'<section class="answer" data-stack="{attribute(to_query(named.services, named.values))}"'
            f'{"" if shown else " hidden"}><p class="answer-for">The answer for <strong>{attribute(named.title)}</strong></p>'
            f'<p class="hint">{attribute(named.says)} {exposed} faults can happen to it.</p>'
            f"{answer_table(advice, cell_for, inline)}</section>")


def answers_html(view: RunView, cell_for: CellFor, inline: Inline) -> str:
    """The stack choice and every named stack's answer, every stack's shown until one is chosen."""
    options = "".join(f'<option value="{attribute(to_query(s.services, s.values))}">{attribute(s.title)}</option>'
                      for s in (EVERY_STACK, *PANEL_STACKS))
    sections = [_section(view, s, cell_for, inline, s is EVERY_STACK) for s in (EVERY_STACK, *PANEL_STACKS)]
    return ('<div id="answer"><label class="stack-choice">Your stack <select id="stack-choice">'
            f'{options}</select></label><span class="hint">Every answer is computed by <code>lab report</code> as '
            "<code>lab doctor --advise</code> computes it; for a stack not listed, run "
            "<code>lab doctor --advise</code> against your servers. The page's address keeps the choice.</span>"
            f'<p id="stack-unknown" hidden></p>{"".join(sections)}</div>')


ANSWER_SCRIPT = """
(() => {
  const choice = document.getElementById("stack-choice");
  if (!choice) return;
  const sections = Array.from(document.querySelectorAll("section.answer"));
  const unknown = document.getElementById("stack-unknown");
  function choose(query, keep) {
    const found = sections.find(s => s.dataset.stack === query);
    unknown.hidden = !!found || !query;
    if (!found && query) unknown.textContent = "This page answers for the stacks it lists, not for " + query +
      ": run lab doctor --advise against your servers.";
    const shown = found || sections[0];
    for (const s of sections) s.hidden = s !== shown;
    choice.value = shown.dataset.stack;
    if (keep) history.replaceState(null, "", shown === sections[0] ? location.pathname : shown.dataset.stack);
  }
  choice.addEventListener("change", () => choose(choice.value, true));
  choose(location.search, false);
})();
"""

ANSWER_STYLE = """
#answer { margin: 0 0 1em; }
#answer .stack-choice { font-weight: bold; margin-right: 1em; }
table.answer { border-collapse: collapse; font-size: 13px; margin: .4em 0; }
table.answer th, table.answer td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
table.answer details { font-weight: normal; font-size: 12px; max-width: 38em; }
button.answer-cell { font: inherit; text-align: left; background: #eef6ee; border: 1px solid #9c9; cursor: pointer; }
section.answer p.answer-for { font-size: 16px; margin: .5em 0 .2em; }
"""

__all__ = ["answers_html", "answer_table", "ANSWER_SCRIPT", "ANSWER_STYLE"]
