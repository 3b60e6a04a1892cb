"""The servers a run uses, started by the lab or given to it, and the clients and proxy that reach them.

The bottom layer: it imports nothing of the lab but lab.errors.
"""
