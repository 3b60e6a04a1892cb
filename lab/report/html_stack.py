"""report.html's stack panel: the form (the services a stack runs and every trait lab/exposure.py declares, each
with its values and unknown) and the data its script answers from, embedded once, gzipped like a cell's.

The script (lab/report/html_stack_script.py) does in the browser what lab/report/advice.py does in Python: which
columns can happen to each lock (the columns' declared conditions and the services each lock lives on), then the
decision page's comparison over the cells left (lab/report/decide.py). So the data is what those read, computed
here once: each cell's outcome (lab/report/standing.py) with its exercised trials and bound, each lock's services,
the needs it can serve (the lambdas of NEEDS, evaluated here) and its cost sentence, and the store findings with
their measured siblings. Nothing here depends on a stack: the same run gives the same bytes.
"""

from __future__ import annotations

from lab.exposure import TRAITS
from lab.report.advice import StackView, measured, store_columns
from lab.report.decide import NEEDS, can_serve, where_of
from lab.report.markdown_html import attribute
from lab.decision.cells import SEVERITY
from lab.report.sections import RunView
from lab.decision.standing import Outcome, outcome_of
from lab.stack import Stack
from lab.stack_choices import SERVICES, SERVICES_KEY

OUTCOMES = list(Outcome)  # a cell's outcome is its index here


def _cell(cell) -> int | list:
    """An outcome's index; a ✓ (kept) as [exercised trials, bound, strong], what the comparison weighs."""
    outcome = outcome_of(cell)
    if outcome is Outcome.KEPT:
        return [cell.exercised, cell.bound, int(cell.strong)]
    return OUTCOMES.index(outcome)


def stack_data(run: RunView) -> dict:
    """Everything the panel's script reads, in the matrix's row and column order (lists, never keyed objects: the
    page's JSON sorts keys)."""
    view = StackView.of(run, Stack())
    meta = run.meta
    columns = [[scenario, column.variant, column.label,
                None if h.conditions is None else [[c.trait.value, list(c.any_of)] for c in h.conditions],
                None if h.strikes is None else list(h.strikes)]
               for (scenario, column), h in zip(view.columns, view.conditions)]
    rows = []
    for backend, cells in view.rows.items():
        where = where_of(meta, backend)
        services = sorted(view.services[backend]) if backend in view.services else None
        lock_row = backend != view.control and "@" not in backend and where is not None
        needs = [i for i, need in enumerate(NEEDS) if lock_row and can_serve(need, meta, backend)]
        rows.append([backend, services, where.lock if where else None, needs, view.cost(backend) if needs else None,
                     [_cell(c.cell) for c in cells]])
    store = []
    for i, finding, siblings in store_columns(view):
        own = set(view.conditions[i].conditions or ())
        beside = [(j, measured(view, j, own)) for j in siblings]
        store.append([i, finding.lost, finding.n, len(finding.store),
                      [[j, list(m.needs), m.control_trials, m.control_acknowledged, m.control_lost, m.locks_ran,
                        m.locks_lost] for j, m in beside]])
    return {
        "services": list(SERVICES),
        "traits": [[t.value, info.service, None if info.within is None else [info.within[0].value, info.within[1]],
                    [[value, says] for value, says in info.says.items()]] for t, info in TRAITS.items()],
        "outcomes": [o.value for o in OUTCOMES],
        "marks": [[m.name, m.value] for m in SEVERITY],  # worst first, as a family's cell counts them
        "needs": [[need.title, need.names_services] for need in NEEDS],
        "control": view.control,
        "columns": columns,
        "rows": rows,
        # [column, lost, n, locks charged to the store, siblings: [column, what it has that the finding's has not,
        # control's trials, acknowledged writes, trials that lost one, locks that ran it, locks that lost one]]
        "store": store,
    }


def panel_html() -> str:
    """The form: a fieldset per service (a box to say the stack runs it), a list per trait with its values and
    unknown; the script fills it from the URL and answers under the summary grid."""
    fieldsets = []
    for service in SERVICES:
        selects = []
        for trait, info in TRAITS.items():
            if info.service != service:
                continue
            name = trait.value.removeprefix(service + ".")
            options = "".join(f'<option value="{value}" title="{attribute(says)}">{value}</option>'
                              for value, says in info.says.items())
            selects.append(f'<label>{name} <select name="{trait.value}" disabled>'
                           f'<option value="">unknown</option>{options}</select></label>')
        fieldsets.append(f'<fieldset data-service="{service}"><legend><label><input type="checkbox" '
                         f'name="{SERVICES_KEY}" value="{service}"> {service}</label></legend>{"".join(selects)}'
                         "</fieldset>")
    return ('<details class="stack-panel" id="stack-panel"><summary>Your stack: '
            '<span id="stack-summary">every stack (choose yours to hide the faults that cannot happen to it and '
            "answer for it)</span></summary>"
            '<form id="stack-form">' + "".join(fieldsets) +
            '<button type="button" id="stack-reset">every stack</button>'
            '<span class="hint">A service left unticked is not in the stack; unknown counts a fault that depends on '
            "it as possible. The page's address keeps the choice.</span></form></details>")


ANSWER_HTML = '<section id="stack-answer" aria-live="polite" hidden></section>'

__all__ = ["stack_data", "panel_html", "ANSWER_HTML", "OUTCOMES"]
