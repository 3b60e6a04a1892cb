"""The rebuild workload: the company table, its statements, one run of the job, and the contract a backend
and the lab exchange (below the backends, so that a job or a holder needs no backend)."""
