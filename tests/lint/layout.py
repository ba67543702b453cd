#!/usr/bin/env python3
"""The map is whole: CONTRIBUTING.md's layout names every folder of the
repository and every SQL file in sql/, one line each, and nothing that is
gone. Folders inside a listed data folder (test expectations, fixtures)
are covered by it. Exit status 1, with what is missing or stale."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# folders whose subfolders are data, named by the folder's own line
DATA = ("tests/regress", "tests/isolation", "tests/juicefs-dump",
        "client/src/object/testdata", "tests/upgrade/withdrawn")


def listed_paths(text):
    """The paths the layout's code block names, one per line it begins."""
    section = text.split("\n## Layout\n", 1)[1]
    block = section.split("```\n", 2)[1]
    paths = set()
    for line in block.splitlines():
        if line and not line[0].isspace():
            paths.add(line.split()[0].rstrip("/"))
    return paths


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return [f for f in out.splitlines() if os.path.exists(os.path.join(ROOT, f))]


def main():
    with open(os.path.join(ROOT, "CONTRIBUTING.md")) as f:
        listed = listed_paths(f.read())
    files = tracked()
    folders = set()
    for f in files:
        d = os.path.dirname(f)
        while d:
            folders.add(d)
            d = os.path.dirname(d)
    needed = {d for d in folders
              if not any(d.startswith(data + "/") for data in DATA)}
    needed |= {f for f in files if re.fullmatch(r"sql/[^/]+\.sql", f)}
    top_files = {f for f in files if "/" not in f}
    missing = sorted(needed - listed)
    stale = sorted(p for p in listed - needed - top_files)
    for p in missing:
        print(f"CONTRIBUTING.md's layout does not name {p}: add a line for it")
    for p in stale:
        print(f"CONTRIBUTING.md's layout names {p}, which is not in the repository")
    if missing or stale:
        return 1
    print(f"layout: {len(needed)} folders and SQL files, each named once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
