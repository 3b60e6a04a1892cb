"""What a trial is made of: the workload, a run's job, a holder process, its history, the checkers
that judge it, what its holder was told, and the typed outcome words. Imports lab.servers only.
"""
