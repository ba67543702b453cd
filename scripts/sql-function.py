#!/usr/bin/env python3
"""Prints the definition of functions or views of sql/ (with the comment
lines above each), for an upgrade script: `--replace` writes CREATE OR
REPLACE for what an older release has already.

    scripts/sql-function.py [--replace] NAME...
"""
import pathlib
import re
import sys

SQL = pathlib.Path(__file__).resolve().parent.parent / "sql"


def definition(name):
    start = re.compile(r"^CREATE (FUNCTION|VIEW) %s\b" % re.escape(name))
    for path in sorted(SQL.glob("*.sql")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if not start.match(line):
                continue
            first = i
            while first > 0 and lines[first - 1].startswith("--"):
                first -= 1
            end = i
            if line.startswith("CREATE VIEW"):
                while not lines[end].rstrip().endswith(";"):
                    end += 1
            else:
                dollars = 0
                while True:
                    dollars += lines[end].count("$$")
                    if dollars >= 2 and lines[end].rstrip().endswith(";"):
                        break
                    end += 1
            return "\n".join(lines[first : end + 1])
    sys.exit(f"no function or view {name} in {SQL}")


def main(args):
    replace = "--replace" in args
    names = [a for a in args if a != "--replace"]
    if not names:
        sys.exit(__doc__)
    for name in names:
        text = definition(name)
        if replace:
            text = re.sub(r"^CREATE (FUNCTION|VIEW)", r"CREATE OR REPLACE \1", text, count=1, flags=re.M)
        print(text + "\n")


main(sys.argv[1:])
