"""locklab: measure which lock keeps two rebuilds apart when things go wrong."""

__version__ = "0.1.0"
