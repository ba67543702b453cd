#!/usr/bin/env python3
"""Checks that each file of sql/ only uses the functions of files it loads
after: extension/src/lib.rs's `requires` (transitively; `bootstrap` loads
first, `finalize` last) must name every file whose functions a file calls,
in a function body, a default or a view. PL/pgSQL would bind a call into a
later file at call time, but then the stated order is not the real one.

    python3 tests/lint/sql_call_order.py     prints each call into a later file; exit 1 if any
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
ENTRY = re.compile(r'extension_sql_file!\(\s*"\.\./\.\./sql/([a-z_]+)\.sql",\s*name\s*=\s*"([a-z_]+)"'
                   r'\s*,\s*(bootstrap|finalize|requires\s*=\s*\[([^\]]*)\])', re.S)
DEFINITION = re.compile(r'^CREATE (?:OR REPLACE )?FUNCTION (?:jfs\.)?([a-z_][a-z0-9_]*)\s*\(', re.M)
CALL = re.compile(r'(?<![a-z0-9_.])(?:jfs\.)?([a-z_][a-z0-9_]*)\s*\(')
# names of jfs functions that pg_catalog (first on every pinned search_path)
# also has: an unqualified call is PostgreSQL's
SHADOWED = {"format"}


def load_order():
    """{file: set of files it may use} and the files in lib.rs order."""
    text = (ROOT / "extension/src/lib.rs").read_text()
    files, requires, names = [], {}, {}
    for path, name, kind, listed in ENTRY.findall(text):
        names[name] = path
        files.append(path)
        if kind == "bootstrap":
            requires[path] = set()
        elif kind == "finalize":
            requires[path] = None  # everything
        else:
            requires[path] = {n.strip().strip('"') for n in listed.split(",") if n.strip()}
    boot = [f for f in files if requires[f] == set() and f in requires]
    allowed = {}
    for f in files:
        if requires[f] is None:
            allowed[f] = set(files)
            continue
        seen, todo = set(), [names[n] for n in requires[f]]
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                todo.extend(names[n] for n in (requires[g] or ()))
        allowed[f] = seen | set(boot) | {f}
    return files, allowed


def code_of(text):
    """The SQL without comments and string literals (a name in a string is
    not a call), lines kept."""
    text = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
    return re.sub(r"'(?:[^'\n]|'')*'", "''", text)


# a table's name before its column list is no call (a name after FROM or JOIN
# followed by "(" is a set-returning function: a call)
NOT_A_CALL = re.compile(r"(?:INTO|TABLE|REFERENCES|ON)\s+$", re.I)


def main():
    files, allowed = load_order()
    unlisted = sorted(p.stem for p in (ROOT / "sql").glob("*.sql") if p.stem not in files)
    if unlisted:
        print("not loaded by extension/src/lib.rs: " + ", ".join(f"sql/{f}.sql" for f in unlisted))
        return 1
    defined_in = {}
    bodies = {}
    for f in files:
        text = code_of((ROOT / "sql" / f"{f}.sql").read_text())
        bodies[f] = text
        for name in DEFINITION.findall(text):
            defined_in.setdefault(name, f)
    found = []
    for f in files:
        for m in CALL.finditer(bodies[f]):
            name = m.group(1)
            home = defined_in.get(name)
            if home is None or home == f or home in allowed[f]:
                continue
            if name in SHADOWED and not m.group(0).startswith("jfs."):
                continue
            if NOT_A_CALL.search(bodies[f][max(0, m.start() - 20):m.start()]):
                continue
            line = bodies[f].count("\n", 0, m.start()) + 1
            found.append(f"sql/{f}.sql:{line}: calls {name}() of sql/{home}.sql, which it does not require")
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} call(s) into files loaded later or in no stated order "
              "(extension/src/lib.rs, requires)", file=sys.stderr)
        return 1
    print(f"sql/: {len(files)} files, every call goes to a file loaded before")
    return 0


if __name__ == "__main__":
    sys.exit(main())
