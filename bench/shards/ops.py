"""One process's part of bench/shards/run: PHASE (create, stat or unlink)
of files f0..fN-1 in directory DIR, one call each; prints the seconds it
took.
    python3 ops.py DIR N PHASE"""
import os
import sys
import time

directory, count, phase = sys.argv[1], int(sys.argv[2]), sys.argv[3]
names = [os.path.join(directory, f"f{i}") for i in range(count)]
started = time.monotonic()
if phase == "create":
    for name in names:
        os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
elif phase == "stat":
    for name in names:
        os.stat(name)
elif phase == "unlink":
    for name in names:
        os.unlink(name)
else:
    sys.exit(f"unknown phase {phase}")
print(f"{time.monotonic() - started:.6f}")
