#!/usr/bin/env python3
"""Metadata reads of several processes for bench/replica_reads/run; prints JSON.

usage: workload.py DIR make N          (N directories of FILES files)
       workload.py DIR read N SECS     (N processes, each on its directory:
                                        stat of every file, then listings)
"""
import json
import multiprocessing
import os
import sys
import time

FILES = 1000


def make(d, n):
    for p in range(n):
        sub = os.path.join(d, f"p{p}")
        os.mkdir(sub)
        for i in range(FILES):
            os.close(os.open(os.path.join(sub, f"f{i:04d}"), os.O_CREAT | os.O_WRONLY, 0o644))


def stats(sub, secs):
    names = [os.path.join(sub, f"f{i:04d}") for i in range(FILES)]
    done, end = 0, time.perf_counter() + secs
    while time.perf_counter() < end:
        for p in names:
            os.stat(p)
        done += len(names)
    return done


def listings(sub, secs):
    done, end = 0, time.perf_counter() + secs
    while time.perf_counter() < end:
        with os.scandir(sub) as it:
            done += sum(1 for _ in it)
    return done


def run(job, d, n, secs):
    subs = [os.path.join(d, f"p{p}") for p in range(n)]
    with multiprocessing.Pool(n) as pool:
        t = time.perf_counter()
        ops = sum(pool.starmap(job, [(s, secs) for s in subs]))
        return {"ops": ops, "secs": time.perf_counter() - t}


if __name__ == "__main__":
    d, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if phase == "make":
        make(d, n)
        print("{}")
    else:
        secs = float(sys.argv[4])
        print(json.dumps({
            "stat (lookup per file)": run(stats, d, n, secs),
            "readdir (entries listed)": run(listings, d, n, secs),
        }))
