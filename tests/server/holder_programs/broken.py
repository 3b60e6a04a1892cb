"""A holder program that answers its start with a line outside the protocol (the lab must say so in one line)."""

import sys

for line in sys.stdin:
    sys.stdout.write("ready when you are\n")
    sys.stdout.flush()
