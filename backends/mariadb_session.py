"""The post's method 1 on MariaDB: GET_LOCK on a default connection (PyMySQL's autocommit off, SQLAlchemy's
autobegin), never committed."""

from backends._mariadb_session import MariaDBSessionLock
from lab.declarations.post_role import PostRole


class MariaDBSessionLockDefault(MariaDBSessionLock):
    """The post's original code, ported: whether a transaction stays open depends on what the connection reads."""

    name = "mariadb_session"
    summary = "MariaDB GET_LOCK on a default (autocommit off) connection: the post's method 1 on MariaDB"
    analogue_of = PostRole.METHOD_1
