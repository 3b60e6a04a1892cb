"""The post's method 3 on MariaDB: GET_LOCK on an AUTOCOMMIT connection."""

from backends._mariadb_session import MariaDBSessionLock
from lab.declarations.post_role import PostRole


class MariaDBSessionLockAutocommit(MariaDBSessionLock):
    """No transaction stays open between statements, so only wait_timeout or a session end frees it."""

    name = "mariadb_session_autocommit"
    summary = "MariaDB GET_LOCK on an AUTOCOMMIT connection: the post's method 3 on MariaDB"
    analogue_of = PostRole.METHOD_3
    autocommit = True
