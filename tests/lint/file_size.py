#!/usr/bin/env python3
"""No room is crowded: every Rust file of the client, the Python binding
and the end-to-end harness is at most MAX_LINES lines (split by job, as
meta/ and ns/ are). Exit status 1 naming each file over it."""
import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_LINES = 600
TREES = ("client/src", "python/src", "extension/src", "tests/e2e/src")


def main():
    over = []
    for tree in TREES:
        for path in glob.glob(os.path.join(ROOT, tree, "**", "*.rs"), recursive=True):
            with open(path) as f:
                n = sum(1 for _ in f)
            if n > MAX_LINES:
                over.append((n, os.path.relpath(path, ROOT)))
    for n, path in sorted(over, reverse=True):
        print(f"{path}: {n} lines, over {MAX_LINES}: split it by job")
    if over:
        return 1
    print(f"file sizes: every Rust file of {', '.join(TREES)} within {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
