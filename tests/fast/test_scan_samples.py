"""lab scan on planted samples: each the smallest code that has (or has not) one of the post's two bugs.

Every test fails without the feature it names: the sample is read by AST, the lock followed to its connection and to
where that connection was made and configured. No server: the scanner never runs what it reads (a server test,
tests/server/test_scan_trial.py, runs two of these samples for real).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from lab.declarations.post_role import PostRole
from lab.scan.findings import Bug, Driver, LockKind, Result, Status, TxMode
from lab.scan.scanner import scan


def scanned(tmp_path: Path, files: dict[str, str]) -> list[Result]:
    for name, code in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(code))
    report = scan([str(tmp_path / next(iter(files)))] if len(files) == 1 else [str(tmp_path)])
    assert not [w for w in report.warnings if "failed inside its own code" in w.message], report.warnings
    return list(report.results)


def bugs(results: list[Result]) -> list[tuple[Bug | None, int]]:
    return sorted((r.bug, r.site.line) for r in results if r.status is Status.FINDING)


def only(results: list[Result], status: Status) -> list[Result]:
    return [r for r in results if r.status is status]


PSYCOPG2_DEFAULT = """
    import psycopg2

    def run(dsn, work):
        conn = psycopg2.connect(dsn)
        cur = conn.cursor()
        cur.execute("select pg_try_advisory_lock(42)")
        if not cur.fetchone()[0]:
            return
        work()
"""


def test_a_session_lock_on_psycopg2s_default_connection_is_found(tmp_path):
    results = scanned(tmp_path, {"job.py": PSYCOPG2_DEFAULT})
    assert bugs(results) == [(Bug.LEFT_OPEN, 7)]
    finding = only(results, Status.FINDING)[0]
    assert finding.connection is not None and finding.connection.driver is Driver.PSYCOPG2
    assert finding.connection.mode is TxMode.AUTOBEGIN and finding.connection.made_at.line == 5
    assert finding.method is PostRole.METHOD_1
    assert "autocommit = True" in finding.fix


def test_the_same_with_autocommit_on_is_fine(tmp_path):
    code = PSYCOPG2_DEFAULT.replace("conn = psycopg2.connect(dsn)\n",
                                    "conn = psycopg2.connect(dsn)\n        conn.autocommit = True\n")
    results = scanned(tmp_path, {"job.py": code})
    assert bugs(results) == []
    fine = only(results, Status.FINE)
    assert [(r.call, r.method, r.connection.mode) for r in fine] == [
        ("pg_try_advisory_lock", PostRole.METHOD_3, TxMode.AUTOCOMMIT)]


def test_set_session_autocommit_is_autocommit_too(tmp_path):
    code = PSYCOPG2_DEFAULT.replace("conn = psycopg2.connect(dsn)\n",
                                    "conn = psycopg2.connect(dsn)\n        conn.set_session(autocommit=True)\n")
    assert bugs(scanned(tmp_path, {"job.py": code})) == []


SQLALCHEMY = """
    from sqlalchemy import create_engine, text

    engine = create_engine("postgresql+psycopg2://app@db/app")

    def run(work):
        conn = engine.connect(){options}
        got = conn.execute(text("select pg_try_advisory_lock(hashtextextended('rebuild:run', 0))")).scalar()
        if got:
            work()
"""


def test_a_session_lock_on_sqlalchemys_engine_connect_is_found(tmp_path):
    results = scanned(tmp_path, {"job.py": SQLALCHEMY.format(options="")})
    assert bugs(results) == [(Bug.LEFT_OPEN, 8)]
    connection = only(results, Status.FINDING)[0].connection
    assert connection is not None and connection.driver is Driver.SQLALCHEMY and connection.dialect == "psycopg2"
    assert "execution_options" in only(results, Status.FINDING)[0].fix


def test_autocommit_set_on_the_connection_is_fine(tmp_path):
    code = SQLALCHEMY.format(options='.execution_options(isolation_level="AUTOCOMMIT")')
    results = scanned(tmp_path, {"job.py": code})
    assert bugs(results) == [] and [r.method for r in only(results, Status.FINE)] == [PostRole.METHOD_3]


def test_autocommit_set_on_the_engine_is_fine(tmp_path):
    on_engine = 'create_engine("postgresql://app@db/app", isolation_level="AUTOCOMMIT")'
    code = SQLALCHEMY.format(options="").replace('create_engine("postgresql+psycopg2://app@db/app")', on_engine)
    assert bugs(scanned(tmp_path, {"job.py": code})) == []
    code = SQLALCHEMY.format(options="").replace("engine.connect()",
                                                 'engine.execution_options(isolation_level="AUTOCOMMIT").connect()')
    assert bugs(scanned(tmp_path, {"job2.py": code})) == []


def test_a_session_is_followed_like_a_connection(tmp_path):
    code = """
        from sqlalchemy import create_engine, text
        from sqlalchemy.orm import Session

        def run(work):
            session = Session(create_engine("postgresql://app@db/app"))
            session.execute(text("select pg_advisory_lock(1)"))
            work()
    """
    assert bugs(scanned(tmp_path, {"job.py": code})) == [(Bug.LEFT_OPEN, 7)]


COMMIT_THEN = """
    from sqlalchemy import create_engine, text

    engine = create_engine("postgresql://app@db/app")

    def run(work):
        conn = engine.connect()
        got = conn.execute(text("select pg_try_advisory_lock(hashtextextended('rebuild:run', 0))")).scalar()
        conn.commit(){then}
        work()
"""


def test_a_commit_right_after_the_lock_is_fine(tmp_path):
    results = scanned(tmp_path, {"job.py": COMMIT_THEN.format(then="")})
    assert bugs(results) == [] and [r.method for r in only(results, Status.FINE)] == [PostRole.METHOD_2]


def test_a_statement_after_that_commit_reopens_the_transaction_and_is_found(tmp_path):
    code = COMMIT_THEN.format(then='\n        conn.execute(text("select 1"))  # is my lock still held?')
    results = scanned(tmp_path, {"job.py": code})
    assert bugs(results) == [(Bug.REOPENED, 8)]
    finding = only(results, Status.FINDING)[0]
    assert finding.related is not None and finding.related.line == 10
    assert finding.method is PostRole.METHOD_2


def test_the_post_case_d_across_methods_of_one_class(tmp_path):
    """acquire() commits after the lock; touch() runs one more query on the same connection: whatever order the
    caller uses, the scanner meets them on one connection."""
    code = """
        from sqlalchemy import create_engine, text

        class Lock:
            def __init__(self, url):
                self.engine = create_engine(url)
                self.conn = None

            def acquire(self):
                self.conn = self.engine.connect()
                got = self.conn.execute(text("select pg_try_advisory_lock(7)")).scalar()
                self.conn.commit()
                return got

            def touch(self):
                self.conn.execute(text("select 1"))
    """
    assert bugs(scanned(tmp_path, {"lock.py": code})) == [(Bug.REOPENED, 11)]


def test_a_transaction_level_lock_and_a_row_lock_are_fine(tmp_path):
    code = """
        from sqlalchemy import create_engine, text

        engine = create_engine("postgresql://app@db/app")

        def rebuild(company):
            with engine.begin() as conn:
                conn.execute(text("select pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": company})
                conn.execute(text("select 1 from parents where id = :c for update"), {"c": company})
                conn.execute(text("delete from rows where company_id = :c"), {"c": company})
    """
    results = scanned(tmp_path, {"job.py": code})
    assert bugs(results) == []
    assert sorted((r.call, r.lock) for r in only(results, Status.FINE)) == [
        ("FOR UPDATE", LockKind.ROW), ("pg_advisory_xact_lock", LockKind.TRANSACTION)]


RELEASE = """
    from sqlalchemy import create_engine, text

    engine = create_engine("postgresql://app@db/app", isolation_level="AUTOCOMMIT")

    def release(conn, log):
{body}
"""


def test_a_release_whose_false_is_ignored_is_found(tmp_path):
    body = '        conn.execute(text("select pg_advisory_unlock(1)"))\n        log.info("released")'
    assert bugs(scanned(tmp_path, {"job.py": RELEASE.format(body=body)})) == [(Bug.RELEASE_FALSE_IGNORED, 7)]


def test_a_release_whose_exception_is_swallowed_is_found(tmp_path):
    body = ('        try:\n            released = conn.execute(text("select pg_advisory_unlock(1)")).scalar()\n'
            '            if not released:\n                raise RuntimeError("lost")\n'
            '        except Exception:\n            pass\n        log.info("released cleanly")')
    results = scanned(tmp_path, {"job.py": RELEASE.format(body=body)})
    assert bugs(results) == [(Bug.RELEASE_ERROR_SWALLOWED, 8)]
    assert only(results, Status.FINDING)[0].related.line == 11  # the except clause


def test_a_release_that_reads_its_answer_and_lets_failure_out_is_fine(tmp_path):
    body = ('        try:\n            released = conn.execute(text("select pg_advisory_unlock(1)")).scalar()\n'
            '        except Exception as exc:\n            raise RuntimeError("lock lost") from exc\n'
            '        if not released:\n            raise RuntimeError("lock lost")')
    assert bugs(scanned(tmp_path, {"job.py": RELEASE.format(body=body)})) == []


def test_a_connection_built_in_another_module_is_followed(tmp_path):
    files = {"app/db.py": """
                import psycopg2

                def lock_connection(dsn):
                    return psycopg2.connect(dsn)
             """,
             "app/__init__.py": "",
             "app/job.py": """
                from app.db import lock_connection

                def run(dsn, work):
                    conn = lock_connection(dsn)
                    with conn.cursor() as cur:
                        cur.execute("select pg_advisory_lock(3)")
                    work()
             """}
    results = scanned(tmp_path, files)
    finding = [r for r in only(results, Status.FINDING) if r.site.path.endswith("job.py")]
    assert [(r.bug, r.site.line) for r in finding] == [(Bug.LEFT_OPEN, 7)]
    made = finding[0].connection.made_at
    assert made is not None and made.path.endswith("db.py") and made.line == 5


def test_a_connection_from_a_module_that_is_not_there_is_unknown_with_why(tmp_path):
    code = """
        from sqlalchemy import text
        from company_platform.db import lock_connection

        def run(work):
            conn = lock_connection()
            conn.execute(text("select pg_advisory_lock(3)"))
            work()
    """
    results = scanned(tmp_path, {"job.py": code})
    assert bugs(results) == []
    unknown = only(results, Status.UNKNOWN)
    assert [r.site.line for r in unknown] == [7]
    assert "company_platform.db" in unknown[0].connection.why


def test_a_connection_handed_in_is_unknown_and_its_caller_decides(tmp_path):
    code = """
        import psycopg2

        def take(conn):
            conn.cursor().execute("select pg_advisory_lock(3)")

        def main(dsn, work):
            conn = psycopg2.connect(dsn)
            take(conn)
            work()
    """
    results = scanned(tmp_path, {"job.py": code})
    # Reached through main(): the connection main() made, at the lock's own line.
    assert bugs(results) == [(Bug.LEFT_OPEN, 5)]
    finding = only(results, Status.FINDING)[0]
    assert finding.connection.made_at.line == 8 and finding.owners == ("job.main",)
    # take() on its own: a parameter, so unknown, and why.
    unknown = only(results, Status.UNKNOWN)
    assert [(r.site.line, r.owners) for r in unknown] == [(5, ("job.take",))]
    assert "parameter" in unknown[0].connection.why


def test_django_is_autocommit_unless_inside_atomic(tmp_path):
    code = """
        from django.db import connection, transaction

        def fine():
            with connection.cursor() as cur:
                cur.execute("select pg_advisory_lock(1)")

        def left_open():
            connection.set_autocommit(False)
            with connection.cursor() as cur:
                cur.execute("select pg_advisory_lock(2)")
    """
    results = scanned(tmp_path, {"job.py": code})
    assert bugs(results) == [(Bug.LEFT_OPEN, 11)]
    assert [r.site.line for r in only(results, Status.FINE)] == [6]


def test_psycopg3_and_asyncpg_defaults(tmp_path):
    code = """
        import asyncpg
        import psycopg

        def psycopg_default(dsn, work):
            conn = psycopg.connect(dsn)
            conn.execute("select pg_advisory_lock(1)")
            work()

        def psycopg_autocommit(dsn, work):
            conn = psycopg.connect(dsn, autocommit=True)
            conn.execute("select pg_advisory_lock(2)")
            work()

        async def with_asyncpg(dsn, work):
            conn = await asyncpg.connect(dsn)
            await conn.fetchval("select pg_advisory_lock(3)")
            work()
    """
    results = scanned(tmp_path, {"job.py": code})
    assert bugs(results) == [(Bug.LEFT_OPEN, 7)]
    assert sorted(r.site.line for r in only(results, Status.FINE)) == [12, 17]


def test_the_guard_turned_off_on_the_session_is_fine_and_says_why(tmp_path):
    code = PSYCOPG2_DEFAULT.replace('cur = conn.cursor()\n',
                                    'cur = conn.cursor()\n        '
                                    'cur.execute("set idle_in_transaction_session_timeout = 0")\n')
    results = scanned(tmp_path, {"job.py": code})
    assert bugs(results) == [] and [r.method for r in only(results, Status.FINE)] == [PostRole.GUARD_OFF]


def test_mariadb_get_lock_is_seen_but_not_judged(tmp_path):
    code = """
        from sqlalchemy import create_engine, text

        def run(work):
            conn = create_engine("mariadb+pymysql://app@db/app").connect()
            conn.execute(text("select get_lock('rebuild', 0)"))
            work()
    """
    results = scanned(tmp_path, {"job.py": code})
    assert bugs(results) == [] and [(r.status, r.lock) for r in results] == [
        (Status.NOT_JUDGED, LockKind.MARIADB_NAMED)]


def test_a_file_that_does_not_parse_is_a_warning(tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "job.py").write_text(textwrap.dedent(PSYCOPG2_DEFAULT))
    report = scan([str(tmp_path)])
    assert [r.bug for r in report.findings] == [Bug.LEFT_OPEN]
    assert [(Path(w.site.path).name, "does not parse" in w.message or "parses" in w.message)
            for w in report.warnings] == [("broken.py", True)]
