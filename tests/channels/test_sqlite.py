"""SQLite databases shared by processes: not recorded, and said so in every query.

A parent fills a job table that its child polls (a real SQLite file in the
test's folder). libsqlite3 reads and writes the file in C, so nothing
records the hand-over: the parent's ``produce`` does not reach the child's
``consume``. Expected by hand: each process that connected to the file
names it in the run's problems, so the impact set says where it may stop;
an in-memory database (private to its process) is not named.
"""

from __future__ import annotations

from tests.channels.support import run_both

SHARED = r'''
import sqlite3, subprocess, sys, time

def produce():
    return 41

def consume(x):
    return x + 1

db = sqlite3.connect("jobs.db", 5.0, 0, "DEFERRED", True, sqlite3.Connection, 128, False)
if len(sys.argv) > 1:
    while not (row := db.execute("select value from jobs").fetchone()):
        time.sleep(0.02)
    print(consume(row[0]), isinstance(db, sqlite3.Connection))
else:
    db.execute("create table if not exists jobs (value integer)")
    db.execute("delete from jobs")
    db.commit()
    child = subprocess.Popen([sys.executable, __file__, "poll"])
    time.sleep(0.2)
    db.execute("insert into jobs values (?)", (produce(),))
    db.commit()
    assert child.wait() == 0
'''

PRIVATE = r'''
import sqlite3
for db in (sqlite3.connect(":memory:"), sqlite3.connect("file:scratch?mode=memory", uri=True)):
    db.execute("create table t (x)")
print("private")
'''


def test_a_shared_database_is_named_in_every_process_that_opened_it(program) -> None:
    script = program("jobs.py", SHARED)
    traced = run_both(script)
    assert traced.stdout == "42 True\n"
    database = script.parent / "jobs.db"
    lines = [p for p in traced.run.problems if f"SQLite database {database}:" in p]
    assert len(lines) == 2 and len(traced.run.processes) == 2, traced.run.problems
    assert traced.errors() == 0


def test_an_in_memory_database_is_not_named(program) -> None:
    traced = run_both(program("private.py", PRIVATE))
    assert traced.stdout == "private\n"
    assert not [p for p in traced.run.problems if "SQLite" in p], traced.run.problems
