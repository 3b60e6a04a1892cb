"""A stack as its owner describes it (services and the traits that decide which faults can happen to it), the
choices report.html's panel offers, and which fault columns can happen to a lock on it."""
