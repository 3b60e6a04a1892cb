"""The row lock in its FOR NO KEY UPDATE form: the same exclusion, and foreign-key inserts go through.

A second backend rather than an option of row_lock: the matrix has a row per backend, so both forms
meet every fault and their rows can be read side by side. FOR NO KEY UPDATE conflicts with itself
(two rebuilds still queue) but not with FOR KEY SHARE, the lock a foreign-key check takes on the
referenced row, so a child row referencing the company is not held up by a rebuild.
"""

from backends.row_lock import RowLock


class RowLockNoKey(RowLock):
    name = "row_lock_no_key"
    summary = "a parent row per company locked FOR NO KEY UPDATE as the first statement of its write transaction"
    row_lock_strength = "NO KEY UPDATE"
