"""The lab's exceptions: user-facing errors that end a command with one line, and lock loss."""


class LabError(Exception):
    """A problem the user can fix (bad input, unreachable server); printed as one line, exit 2."""


class ServiceError(LabError):
    """A server could not be started, reached or used."""


class LockLost(Exception):
    """The holder's right to write is gone; raised by held()/release()/fenced writes, never swallowed.

    `told` says how the lock's own library or server said so: "exception" when it raised,
    "false" when it returned a refusal, for the report's "what the holder was told".
    """

    def __init__(self, message: str, told: str = "exception"):
        super().__init__(message)
        self.told = told


class Interrupted(Exception):
    """The run was asked to stop (Ctrl-C, SIGTERM) while a trial was waiting."""
