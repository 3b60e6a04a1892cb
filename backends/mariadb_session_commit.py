"""The post's method 2 on MariaDB: GET_LOCK, with a commit right after taking it."""

from backends._mariadb_session import MariaDBSessionLock
from lab.declarations.post_role import PostRole


class MariaDBSessionLockCommitted(MariaDBSessionLock):
    """Closing the transaction right away; the connection's next table read opens another."""

    name = "mariadb_session_commit"
    summary = "MariaDB GET_LOCK, commit right after acquiring: the post's method 2 on MariaDB"
    analogue_of = PostRole.METHOD_2
    commit_after_acquire = True
