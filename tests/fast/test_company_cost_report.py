"""Each lock's own write path per company, read and rendered from a planted run: the typed figure the decision reads
(lab/report/company_cost.py), its section (lab/report/company_cost_table.py), and when the scenario stops repeating."""

import pytest

from lab.measures.shapes import LockScope
from lab.report.company_cost import cheaper, company_cost, company_costs
from lab.report.company_cost_table import section_company_cost
from lab.report.sections import RunView
from lab.runner import pacing
from scenarios.base import TrialSpec
from scenarios.cost_per_company import CostPerCompany

SCENARIO, VARIANT, LATENCY = "cost_per_company", "transaction_per_company", "latency"
ORDER = ["none", "xact", "serializable", "row_lock", "unique_backstop", "etcd_fenced", "mariadb_row_lock"]
META = {"measured": {SCENARIO: "company_cost", LATENCY: "lock_latency"}, "post_roles": {"none": "no_lock"},
        "backend_order": ORDER,
        "precision": {SCENARIO: {"tolerance": 0.1, "floor": 3, "cap": 5, "repetitions": 3, "reached": True,
                                 "settled": False, "out_of_time": False, "spread": 0.05}}}
COMPANIES = 96


def arm(per_company: float, failed: int = 0, retried: int = 0) -> dict:
    filled = COMPANIES + 1
    return {"table": "locklab.rows_x", "seconds": per_company * COMPANIES, "per_company": per_company,
            "blocks": [per_company * 12] * 8, "block_companies": [12] * 8, "transactions": COMPANIES,
            "failed": failed, "attempts": COMPANIES + retried, "rows_final": filled * 220, "companies_final": filled}


def measures(ratio: float, lock_s: float, base_s: float, *, scope=LockScope.EACH_COMPANY, fenced=False,
             store="postgres", failed=0, retried=0, release="released") -> dict:
    return {"companies": COMPANIES, "filled": COMPANIES + 1, "rows": 220, "store": store, "scope": scope.value,
            "fenced": fenced, "order": ["lock", "baseline", "baseline", "lock"] * 4, "pairs": [ratio] * 8,
            "lock": arm(lock_s, failed, retried), "baseline": arm(base_s), "ratio": ratio,
            "acquire_s": 0.002 if scope is LockScope.ONCE_PER_RUN else None,
            "release_s": 0.001 if scope is LockScope.ONCE_PER_RUN else None,
            "release": release if scope is LockScope.ONCE_PER_RUN else None,
            "floors": {"select 1": 0.0002, "one-row commit": 0.001 if store == "postgres" else 0.0004},
            "floor_samples": 17}


def record(backend: str, index: int, m: dict, scenario: str = SCENARIO, variant: str = VARIANT) -> dict:
    return {"id": f"{scenario}/{backend}/{variant}/{index}", "scenario": scenario, "backend": backend,
            "variant": variant, "index": index, "status": "ok", "measures": m}


def planted() -> list[dict]:
    """Three repetitions: the control against itself (its range holds 1), method 4 a little dearer every time and a
    row lock about as dear, a fenced lock dearer still (its release raising once), SERIALIZABLE retrying once, a
    MariaDB row lock against MariaDB, and a lock whose every trial failed a transaction."""
    out = []
    for i in range(3):
        out += [record("none", i, measures([0.97, 1.0, 1.03][i], 0.0015, 0.0015)),
                record("xact", i, measures([1.04, 1.06, 1.05][i], 0.00158, 0.0015)),
                record("row_lock", i, measures([1.03, 1.07, 1.05][i], 0.00158, 0.0015)),
                record("etcd_fenced", i, measures([1.20, 1.24, 1.22][i], 0.00183, 0.0015,
                                                  scope=LockScope.ONCE_PER_RUN, fenced=True,
                                                  release="raised LockLost: gone" if i == 2 else "released")),
                record("serializable", i, measures([1.10, 1.12, 1.11][i], 0.0017, 0.0015, retried=int(i == 1))),
                record("mariadb_row_lock", i, measures([1.3, 1.25, 1.35][i], 0.004, 0.003, store="mariadb")),
                record("unique_backstop", i, measures(1.5, 0.002, 0.0015, failed=2))]
    out.append(record("etcd_fenced", 0, {"acquire_release": {"p50": 0.002}}, LATENCY, "default"))
    return out


def test_the_figure_the_decision_reads_is_typed_and_keeps_company_seconds_contract():
    view = RunView.of(planted(), META)
    xact = company_cost(view.frame, "xact")
    assert xact is not None and xact.company_seconds == (0.00158, COMPANIES, 3)
    control = company_cost(view.frame, "none")
    assert (xact.ratio, xact.ratio_low, xact.ratio_high) == (1.05, 1.04, 1.06)
    assert not xact.within_noise() and not xact.within_noise(control)  # above the control's own 0.97-1.03
    assert xact.added_seconds == pytest.approx(0.0015 * 0.05)
    fenced = company_cost(view.frame, "etcd_fenced")
    assert fenced is not None and (fenced.scope, fenced.fenced, fenced.store) == (LockScope.ONCE_PER_RUN, True,
                                                                                  "postgres")
    assert control is not None and control.within_noise()  # the control against itself
    assert company_cost(view.frame, "serializable").retries == 1
    assert company_cost(view.frame, "unique_backstop") is None  # writes that did not happen are no cost
    assert company_cost(view.frame, "queue") is None  # not timed in this run
    assert list(company_costs(view.frame)) == ["none", "xact", "serializable", "row_lock", "etcd_fenced",
                                               "mariadb_row_lock"]


def test_a_lock_within_the_controls_own_spread_adds_nothing_the_run_can_tell():
    trials = [r for r in planted() if r["backend"] != "none"]
    trials += [record("none", i, measures([1.02, 1.08, 1.10][i], 0.0015, 0.0015)) for i in range(3)]
    view = RunView.of(trials, META)
    xact, control = company_cost(view.frame, "xact"), company_cost(view.frame, "none")
    assert not xact.within_noise() and xact.within_noise(control)  # 1.04-1.06 inside the control's 1.02-1.10
    assert not company_cost(view.frame, "etcd_fenced").within_noise(control)  # 1.20-1.24: above it
    assert not company_cost(view.frame, "mariadb_row_lock").within_noise(control)  # another store: its range alone
    rows = [line for line in section_company_cost(view).splitlines() if line.startswith("| xact |")]
    assert "| within noise |" in rows[0]


def test_two_costs_differ_only_where_their_ratios_do_not_overlap_on_one_store():
    costs = company_costs(RunView.of(planted(), META).frame)
    assert cheaper(costs["xact"], costs["etcd_fenced"]) is costs["xact"]
    assert cheaper(costs["etcd_fenced"], costs["xact"]) is costs["xact"]
    assert cheaper(costs["xact"], costs["none"]) is costs["none"]  # 1.04-1.06 against 0.97-1.03
    assert cheaper(costs["xact"], costs["row_lock"]) is None  # 1.04-1.06 against 1.03-1.07: a tie
    assert cheaper(costs["serializable"], costs["etcd_fenced"]) is costs["serializable"]
    assert cheaper(costs["mariadb_row_lock"], costs["xact"]) is None  # on different stores: not comparable


def test_the_section_shows_every_timed_lock_against_no_lock_and_the_floor():
    text = section_company_cost(RunView.of(planted(), META))
    assert text is not None and text.startswith("## What each lock's own write costs per company")
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert "nothing: the control against itself" in rows["none"] and "its own spread: 0.97-1.03" in rows["none"]
    assert "its lock, claim or retry" in rows["xact"] and "1.05 (1.04-1.06)" in rows["xact"]
    assert "+75 µs (+0.4 round trips)" in rows["xact"]
    assert "the write and its fence upsert" in rows["etcd_fenced"]
    assert "acquire + release 2.00 ms" in rows["etcd_fenced"]
    assert "| 3; its release raised in 1 |" in rows["etcd_fenced"]  # its writes committed: still a cost
    assert "| 3; 1 retried |" in rows["serializable"]
    assert "| MariaDB |" in rows["mariadb_row_lock"]
    assert "unique_backstop" not in rows and "Not shown: unique_backstop" in text
    assert "- MariaDB: a `select 1` round trip 200 µs, a one-row commit 400 µs" in text
    assert "(its ratios to no lock): 6 of 6 within +-10%." in text


def test_a_backend_whose_ratios_stayed_wide_is_named_with_its_spread():
    trials = [r for r in planted() if r["backend"] != "serializable"]
    trials += [record("serializable", i, measures(r, 0.0017, 0.0015)) for i, r in enumerate((1.0, 1.4, 1.2, 1.3, 1.1))]
    text = section_company_cost(RunView.of(trials, META))
    assert "(its ratios to no lock): 5 of 6 within +-10%; wider: serializable (+-16.7% over 5)." in text


def test_a_run_without_company_cost_trials_renders_nothing():
    perf_only = [record("xact", 0, {"seconds": 1.0}, "perf", "per_company_lock")]
    assert section_company_cost(RunView.of(perf_only, {"measured": {"perf": "cost"}})) is None


def ratio_records(ratios: dict[str, list[float]]) -> list[dict]:
    return [record(backend, i, {"ratio": r}) for backend, series in ratios.items()
            for i, r in enumerate(series)]


def test_each_backend_stops_repeating_once_its_own_ratios_are_tight():
    scenario = CostPerCompany()

    def needed(backend: str, index: int, done: list[dict]) -> bool:
        return pacing.needed(scenario, "default", TrialSpec(SCENARIO, backend, VARIANT, index), done)

    done = ratio_records({"xact": [1.05, 1.06, 1.04], "etcd_fenced": [1.0, 1.4, 1.2]})
    assert needed("xact", 2, done[:2])  # the floor of three runs whatever the first two said
    assert not needed("xact", 3, done)  # tight: no fourth
    assert needed("etcd_fenced", 3, done)  # noisy: a fourth, whatever the others did
    noisy = ratio_records({"etcd_fenced": [1.0, 1.4, 1.2, 1.3, 1.1]})
    assert not needed("etcd_fenced", 5, noisy)  # the cap
    outcome = scenario.precision("default", done)
    assert outcome["repetitions"] == 3 and not outcome["reached"]
    assert outcome["backends"]["xact"]["reached"] and not outcome["backends"]["etcd_fenced"]["reached"]


def test_each_repetition_runs_every_backend_in_an_order_of_its_own_the_same_when_resumed():
    import backends

    scenario = CostPerCompany()
    classes = [backends.load(name) for name in ("none", "xact", "serializable", "lease_row", "etcd_fenced")]
    specs = [s for s in scenario.plan(classes, "default") if s.skip is None]
    assert specs == [s for s in scenario.plan(classes, "default") if s.skip is None]
    repetitions = [[s.backend for s in specs if s.index == i] for i in range(5)]
    assert all(sorted(r) == sorted(c.name for c in classes) for r in repetitions)
    assert len({tuple(r) for r in repetitions}) > 1
