"""locklab: measure which lock keeps two rebuilds apart when things go wrong."""

import os

__version__ = "0.1.0"

# The lab forks holders and servers while the etcd client (grpc) is loaded. grpc's fork
# support restarts its event engine in the forked child, where close_fds then closes the
# poller's epoll fd and grpc aborts the child before it can exec (seen as a holder exiting
# with SIGABRT). The lab never uses grpc across a fork, so it turns that support off.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
