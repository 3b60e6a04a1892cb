"""Typed measure shapes and the measured numbers the report reads: the shapes of a trial's measures, the
precision rule for repeated figures, the margin search over a graded fault, a failover's promotion."""
