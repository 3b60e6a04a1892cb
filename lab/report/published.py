"""The figures the post published, as data, so the report can set ours beside them.

Source: "Your Postgres Lock Has a Hidden Expiry Date" (shared/reference/advisory-lock-post.txt),
PostgreSQL 18.6, SQLAlchemy 2.0.51, psycopg2 2.9.13, 3 s timeout in the cases.
"""

from lab.declarations.post_role import PostRole

# The post's figures are about its methods, so its tables are keyed by the role a backend declares
# (lab/declarations/post_role.py), never by a backend's name.
M1, M2, M3, M4 = PostRole.METHOD_1, PostRole.METHOD_2, PostRole.METHOD_3, PostRole.METHOD_4
NO_LOCK, SERIALIZABLE = PostRole.NO_LOCK, PostRole.SERIALIZABLE

CASE_TITLES = {
    "A": "default (autobegin)",
    "B": "AUTOCOMMIT",
    "C": "commit right after acquire",
    "D": "commit, then one more query",
    "E": "AUTOCOMMIT, with idle_session_timeout",
}

# The lines each case printed, after its title line, exactly as published.
CASE_LINES = {
    "A": ["acquired: True, holder state: idle in transaction",
          "t=1s other process gets lock: False",
          "t=5s other process gets lock: True",
          "holder's next query fails: OperationalError"],
    "B": ["acquired: True, holder state: idle",
          "t=1s other process gets lock: False",
          "t=5s other process gets lock: False",
          "holder: alive"],
    "C": ["acquired: True, holder state: idle",
          "t=1s other process gets lock: False",
          "t=5s other process gets lock: False",
          "holder: alive"],
    "D": ["acquired: True, holder state: idle in transaction",
          "t=1s other process gets lock: False",
          "t=5s other process gets lock: True",
          "holder's next query fails: OperationalError"],
    "E": ["acquired: True, holder state: idle",
          "t=1s other process gets lock: False",
          "t=5s other process gets lock: True",
          "holder's next query fails: OperationalError"],
}

# calibrate.py: killed at 2.00 s, seconds at which the second session got the lock.
CALIBRATION_GOT_AT = [2.008, 2.052, 2.006, 2.053, 2.004]
CALIBRATION_KILL_AT = 2.00

# "All four under the same faults", the session-lock columns. "(follows)" marks the
# cells the post reasoned from the connection's state instead of running.
SAME_FAULTS = {
    "idle_in_transaction": {M1: "Lost", M2: "Held", M3: "Held"},
    "query_then_idle_in_transaction": {M1: "Lost (follows)", M2: "Lost", M3: "Held (follows)"},
    "idle_session": {M1: "Not affected: it is in a transaction (follows)",
                     M2: "Lost (follows: it is plain idle)", M3: "Lost"},
    "terminate": {M1: "Lost within one poll (follows)", M2: "Lost within one poll (follows)",
                  M3: "Lost within one poll"},
}

# company_design.py: two rebuilds of one 250-row company at once.
OVERLAP_LINES = {
    NO_LOCK: ["run1: committed, waited 0.0s, deleted 250", "run2: committed, waited 0.0s, deleted 0",
              "rows afterwards: 500"],
    M4: ["run1: committed, waited 0.0s, deleted 250", "run2: committed, waited 0.7s, deleted 250",
         "rows afterwards: 250"],
}
OVERLAP_TITLES = {NO_LOCK: "no lock, READ COMMITTED", M4: "xact lock, READ COMMITTED"}
# "SERIALIZABLE with retry: It works (250 rows)" (Why not just...?)
OVERLAP_ROWS = {NO_LOCK: 500, M4: 250, SERIALIZABLE: 250}
REPEATABLE_READ_ERROR = "could not serialize access due to concurrent delete"

# The kill test: one kill point, after the delete and before the commit.
KILL_LINES = ["holder: OperationalError", "waiter: committed, waited 0.6s, deleted 250",
              "row counts the observer ever saw: [250]; final rows: 250"]

# company_perf.py, SERIALIZABLE: failures of 8 different companies rebuilt at once.
CONFLICT_FAILURES = {"no_index": 7, "adjacent_ids": 6, "spread_ids": 0}
# The same 10 companies: (seconds, failed attempts).
TEN_COMPANIES = {SERIALIZABLE: (8.8, 101), M4: (5.4, 0)}

# company_perf.py: 6000 companies, 1,320,000 rows; seconds per configuration (single run).
PERF_COMPANIES = 6000
PERF_SECONDS = {
    "one_transaction_for_all": 14.0,
    "transaction_per_company": 21.6,
    "per_company_lock": 21.8,
    "batch_50_sorted": 15.8,
    "workers_4": 6.1,
    "workers_8": 3.5,
}

# timing_sim.py: 10 s timeout, 20 trials per row; (overlapped, trials, min s, max s, within 1 s of the timeout).
TIMING_TIMEOUT_S = 10.0
TIMING = {
    (M1, "cron"): (20, 20, 10.19, 14.98, 4),
    (M1, "event"): (20, 20, 10.06, 12.67, 11),
    (M3, "cron"): (0, 20, None, None, None),
    (M3, "event"): (0, 20, None, None, None),
}

# --- for the scorecard (lab/report/scorecard.py): the post's remaining figures, typed ------------------------

# "How I measured": the versions the post ran.
VERSIONS = {"postgres": "18.6", "python": "3.13", "sqlalchemy": "2.0.51", "psycopg2": "2.9.13"}

# The cells of SAME_FAULTS the post marks "follows" (reasoned from the connection's state, not run):
# (fault, the post's method) -> whether the post says the lock is lost there. (The other cells are cases A-E and
# the calibration, which the scorecard scores as those.)
SAME_FAULTS_FOLLOWS = {
    ("query_then_idle_in_transaction", M1): True,
    ("query_then_idle_in_transaction", M3): False,
    ("idle_session", M1): False,
    ("idle_session", M2): True,
    ("terminate", M1): True,  # "Lost within one poll (follows)"
    ("terminate", M2): True,  # "Lost within one poll (follows)"
}

# "The run's host loses its network": server keepalives (idle s, interval s, probes) -> when the server
# ends the session, seconds. The defaults' "about 2 hours 11 minutes (7,200 s, then 9 probes 75 s apart)";
# "60 s, 10 s and 3 probes notice in 90 seconds" (the post: not tested on a real network drop).
KEEPALIVE_ENDS = {(7200, 75, 9): 7875, (60, 10, 3): 90}

# "Without the lock, REPEATABLE READ misses a company's first build and leaves 500." (Why not just...?)
REPEATABLE_READ_NO_LOCK_ROWS = 500

# Rule 4: "Lock several companies in sorted order, so two runs cannot deadlock": runs aborted by deadlock.
SORTED_DEADLOCKS = 0

# company_perf.py's line for each configuration of PERF_SECONDS, as printed.
PERF_LABELS = {
    "one_transaction_for_all": "one transaction for all companies, no lock",
    "transaction_per_company": "one transaction per company, no lock",
    "per_company_lock": "one transaction per company + xact lock",
    "batch_50_sorted": "50 companies per transaction + xact locks, sorted",
    "workers_4": "one transaction per company + xact lock, 4 workers",
    "workers_8": "one transaction per company + xact lock, 8 workers",
}
