#!/usr/bin/env python3
"""Create-write-fsync-close of small files: files per second, as JSON.

usage: create.py DIR N SIZE...

For each SIZE (bytes), N new files of that size in DIR/SIZE/, each made
durable before the next (open, write, fsync, close: what an acknowledged
small file costs), the whole run timed.
"""
import json
import os
import sys
import time

d, n, sizes = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]]
out = {}
for size in sizes:
    data = os.urandom(size)
    sub = f"{d}/{size}"
    os.makedirs(sub, exist_ok=True)
    start = time.perf_counter()
    for i in range(n):
        fd = os.open(f"{sub}/{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
    out[str(size)] = n / (time.perf_counter() - start)
print(json.dumps(out))
