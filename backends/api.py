"""The public API for writing a backend: everything a plugin needs, nothing underscored.

    from backends.api import Backend, RebuildResult, LockLost, write_transaction, no_point

A backend subclasses Backend, declares what it is (name, summary, capabilities, services,
lock_service), opens its lock connection to `self.ctx.lock_services`, and implements acquire,
rebuild, held and release; bare_call may name the library call its lock wraps (a BareCall), which
the latency scenario times beside it. `lab check-backend NAME` checks its promises; README, "Write a
backend", walks from an empty file to a report row. A lock held by a program in another language subclasses
ExternalLock instead (README, "A holder in another language").
"""

from backends._fence import FenceRejected, fenced_write
from backends._writes import write_transaction
from backends.base import CAPABILITIES, Backend, BareCall, Capability, NoRunLock
from backends.external import ExternalLock
from lab.errors import LockLost
from lab.servers.clients import pg_engine, redis_client
from lab.workload.contract import (
           POINTS,
           BackendContext,
           Point,
           RebuildResult,
           describe_error,
)
from lab.workload.table import CompanyTable, no_point

__all__ = ["Backend", "NoRunLock", "ExternalLock", "BareCall", "BackendContext", "RebuildResult", "Point", "POINTS", "CAPABILITIES", "Capability",
           "LockLost", "FenceRejected", "write_transaction", "fenced_write", "describe_error", "CompanyTable",
           "no_point", "pg_engine", "redis_client"]
