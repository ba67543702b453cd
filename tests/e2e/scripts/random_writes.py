#!/usr/bin/env python3
"""Small writes at random places of one file, then one fsync: what a
database or a torrent client does (tests/e2e/tests/buffers.rs,
bench/random_writes). The same writes go to a model file on local disk, so
the result can be compared byte for byte.

  random_writes.py PATH MODEL COUNT SPAN SIZE SEED PLACES

COUNT writes of SIZE bytes at SIZE-aligned offsets below SPAN; PLACES > 0
draws the offsets from that many fixed places only (pages written again and
again), 0 from all of SPAN. Prints, as JSON: seconds writing, seconds in
fsync + close.
"""
import json
import os
import random
import sys
import time

path, model, count, span, size, seed, places = sys.argv[1:8]
count, span, size, seed, places = int(count), int(span), int(size), int(seed), int(places)
rng = random.Random(seed)
slots = span // size
chosen = [rng.randrange(slots) for _ in range(places)] if places else None
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
md = os.open(model, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
started = time.perf_counter()
for i in range(count):
    slot = rng.choice(chosen) if chosen else rng.randrange(slots)
    data = rng.randbytes(size)
    os.pwrite(fd, data, slot * size)
    os.pwrite(md, data, slot * size)
written = time.perf_counter()
os.fsync(fd)
os.close(fd)
closed = time.perf_counter()
os.close(md)
print(json.dumps({"write_s": written - started, "close_s": closed - written}))
