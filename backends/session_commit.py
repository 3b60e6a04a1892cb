"""Method 2: the same session lock, with a commit right after taking it."""

from backends._session import SessionLockBackend
from lab.declarations.post_role import PostRole


class SessionLockCommitted(SessionLockBackend):
    """Closing the transaction saves the lock until the next query quietly opens another."""

    name = "session_commit"
    summary = "session advisory lock, commit right after acquiring: the post's method 2"
    post_role = PostRole.METHOD_2
    commit_after_acquire = True
