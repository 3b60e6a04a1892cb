"""Method 3: the session lock on an AUTOCOMMIT connection, the post's immediate fix."""

from backends._session import SessionLockBackend
from lab.declarations.post_role import PostRole


class SessionLockAutocommit(SessionLockBackend):
    """No transaction stays open between statements, so only idle_session_timeout or a session end frees it."""

    name = "session_autocommit"
    summary = "session advisory lock on an AUTOCOMMIT connection: the post's method 3"
    post_role = PostRole.METHOD_3
    autocommit = True
