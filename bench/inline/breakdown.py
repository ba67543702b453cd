#!/usr/bin/env python3
"""Create-write-fsync-close of small files, timed per system call, with the
FUSE requests, procedure calls and object requests they caused (from the
mount's metrics), per file.

usage: breakdown.py DIR N SIZE METRICS_ADDR

N new files of SIZE bytes in a new directory under DIR.
"""
import os
import re
import sys
import time
import urllib.request

d, n, size, metrics = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
LAYERS = {"fuse_op": "fuse", "meta_call": "procedure", "object_request": "object"}


def histograms():
    """(layer, name) -> [count, seconds] of the mount's duration histograms."""
    text = urllib.request.urlopen(f"http://{metrics}/metrics").read().decode()
    out = {}
    pattern = r'jfs_(fuse_op|meta_call|object_request)_duration_seconds_(count|sum)\{[a-z]+="([^"]+)"[^}]*\} (\S+)'
    for layer, kind, name, value in re.findall(pattern, text):
        out.setdefault((LAYERS[layer], name), [0.0, 0.0])[0 if kind == "count" else 1] += float(value)
    return out


data = os.urandom(size)
sub = os.path.join(d, f"run-{time.time_ns()}")
os.makedirs(sub)
calls = {"open": 0.0, "write": 0.0, "fsync": 0.0, "close": 0.0}
before = histograms()
start = time.perf_counter()
for i in range(n):
    t0 = time.perf_counter()
    fd = os.open(f"{sub}/{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    t1 = time.perf_counter()
    os.write(fd, data)
    t2 = time.perf_counter()
    os.fsync(fd)
    t3 = time.perf_counter()
    os.close(fd)
    t4 = time.perf_counter()
    calls["open"] += t1 - t0
    calls["write"] += t2 - t1
    calls["fsync"] += t3 - t2
    calls["close"] += t4 - t3
took = time.perf_counter() - start
after = histograms()
print(f"{n / took:.0f} files/s, {took / n * 1e6:.0f} us per file")
print("system calls, us per file:")
for name, seconds in calls.items():
    print(f"  {name:24} {seconds / n * 1e6:8.0f}")
print("what the mount did, per file: requests and us")
for (layer, name), (count, seconds) in sorted(after.items()):
    c0, s0 = before.get((layer, name), (0, 0))
    if count - c0 >= n / 100:
        print(f"  {layer:9} {name:22} {(count - c0) / n:5.2f} {(seconds - s0) / n * 1e6:8.0f}")
