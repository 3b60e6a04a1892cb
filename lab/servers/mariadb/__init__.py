"""MariaDB from the operating system's packages: the server the lab runs, what it says about a session, and its
latency floor."""
