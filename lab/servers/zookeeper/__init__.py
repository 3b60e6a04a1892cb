"""ZooKeeper from the operating system's packages: one server, a three-server ensemble the lab can partition, and its
latency floor."""
