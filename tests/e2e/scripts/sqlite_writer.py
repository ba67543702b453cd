#!/usr/bin/env python3
"""A SQLite writer on a jfs mount (tests/e2e/tests/outage.rs): inserts a row
per transaction (rollback journal, POSIX locks, a busy timeout) until the
file STOP exists. After each commit it writes its count of commits to
PROGRESS, so a test can see it move. Errors are counted (and the first few
kept), not fatal: a lock lost to an outage may fail a transaction. Prints,
as JSON: commits, errors, the first errors.

  sqlite_writer.py DB WRITER PROGRESS STOP
"""
import json
import os
import sqlite3
import sys
import time

db, writer, progress, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
commits, errors, first = 0, 0, []
conn = None
while not os.path.exists(stop):
    try:
        if conn is None:
            conn = sqlite3.connect(db, timeout=60, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (writer, n) VALUES (?, ?)", (writer, commits))
        conn.execute("COMMIT")
        commits += 1
        with open(progress + ".tmp", "w") as f:
            f.write(str(commits))
        os.replace(progress + ".tmp", progress)
    except sqlite3.Error as e:
        errors += 1
        if len(first) < 5:
            first.append(f"{time.strftime('%H:%M:%S')} {e}")
        try:
            conn.close()
        except Exception:
            pass
        conn = None
        time.sleep(0.1)
    time.sleep(0.005)
print(json.dumps({"commits": commits, "errors": errors, "first": first}))
