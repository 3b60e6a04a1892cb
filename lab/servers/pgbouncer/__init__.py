"""PgBouncer from the operating system's packages, run by the lab in front of its PostgreSQL."""
