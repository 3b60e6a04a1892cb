"""`lab doctor`: what a PostgreSQL, a MariaDB and the other lock services at the addresses given say about the
traps the post describes, the stack description they fill, and the answer for that stack."""
