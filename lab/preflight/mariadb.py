"""What sits at a MariaDB URL: a server that takes the lab's writes, or one that refuses them (read_only on, a
user that may not create the lab's database `locklab`, a database of that name the lab did not create)."""

from __future__ import annotations

import time

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from lab.errors import ServiceError
from lab.preflight.findings import Finding, Problem, Refusal, Sits
from lab.servers.clients import first_line, redact
from lab.workload.table import SCHEMA, SCHEMA_MARK

CONNECT_TIMEOUT = 5
# Whether the user may create the lab's database: CREATE on every database, or on a pattern that names it.
STATE_SQL = ("select @@global.read_only as read_only, version() as version, current_user() as user, "
             "(select count(*) from information_schema.user_privileges where privilege_type = 'CREATE' and "
             "grantee = concat('''', substring_index(current_user(), '@', 1), '''@''', "
             "substring_index(current_user(), '@', -1), '''')) + "
             "(select count(*) from information_schema.schema_privileges where privilege_type = 'CREATE' and "
             ":schema like table_schema and grantee = concat('''', substring_index(current_user(), '@', 1), "
             "'''@''', substring_index(current_user(), '@', -1), '''')) as may_create, "
             "(select schema_comment from information_schema.schemata where schema_name = :schema) as mark")
MEANING = "a lock your jobs take here (GET_LOCK, a row) is the server's own, so each lock behaves as the lab measures it"


def look(url: URL) -> Finding:
    started, shown = time.monotonic(), redact(url)
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT})
    try:
        try:
            with engine.connect() as conn:
                row = conn.execute(text(STATE_SQL), {"schema": SCHEMA}).mappings().one()
        except Exception as exc:
            raise ServiceError(f"mariadb at {shown} is unreachable: {first_line(exc)}") from None
    finally:
        engine.dispose()
    facts = {"version": row["version"], "user": row["user"], "read_only": bool(row["read_only"]),
             "may_create": bool(row["may_create"])}
    seconds = time.monotonic() - started
    if row["read_only"]:
        what = f"MariaDB {row['version']} with read_only on (a replica, or a server kept from writes)"
        return Finding("mariadb", shown, Sits.READ_ONLY, what, "no job can write here", refusal=Refusal(
            Problem.WRITE_REFUSED, f"is {what}: the lab will not write there", "the primary's address with "
                                                                               "--mariadb-url"),
                       facts=facts, seconds=seconds)
    refused = None
    if row["mark"] is not None and row["mark"] != SCHEMA_MARK:
        refused = Refusal(Problem.FOREIGN_SCHEMA, f"has a database {SCHEMA} that the lab did not create, and the lab "
                                                  "touches only its own", "a server without it")
    elif row["mark"] is None and not row["may_create"]:
        user, _, host = str(row["user"]).partition("@")
        refused = Refusal(Problem.NO_CREATE, f"does not let {row['user']} create the lab's database {SCHEMA}",
                          f"the user the grant it needs: GRANT ALL ON {SCHEMA}.* TO '{user}'@'{host}' (the lab works "
                          f"only in that database, which it creates and drops)")
    return Finding("mariadb", shown, Sits.PRIMARY, f"MariaDB {row['version']}, a primary", MEANING, refusal=refused,
                   facts=facts, seconds=seconds)
