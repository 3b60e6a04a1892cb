"""The decision: which lock to use for which need, computed once from the trials and the locks' declarations.

It reads cells (a backend's trials under one fault column, the no-lock control's beside them) and declarations
(capabilities, where each lock lives, what each column strikes) and writes plain data: a mark per cell read for a
need's harm, each candidate's standing, the comparison and its stated ranking, the answer per need. REPORT.md and
report.html draw it (lab/report) and `lab doctor --advise` prints it; nothing else decides.
"""
