#!/usr/bin/env python3
"""File-system workloads for bench/fs_ops/run: times each on one directory, prints JSON.

usage: workload.py DIR PHASE   (PHASE: meta | write | read; "read" expects cold caches)
"""
import json
import os
import random
import sys
import time

MiB = 1 << 20


def timed(fn):
    t = time.perf_counter()
    n = fn()
    return n, time.perf_counter() - t


def meta(d):
    out = {}
    base = os.path.join(d, "empty")
    os.mkdir(base)
    names = [os.path.join(base, f"f{i:05d}") for i in range(10000)]

    def create():
        for p in names:
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
        return len(names)

    def stat():
        for p in names:
            os.stat(p)
        return len(names)

    def stat_dropped():
        # the kernel forgets names and inodes: each stat is a LOOKUP again
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2")
        return stat()

    def ls_l():
        n = 0
        with os.scandir(base) as it:
            for e in it:
                e.stat(follow_symlinks=False)
                n += 1
        return n

    def unlink():
        for p in names:
            os.unlink(p)
        return len(names)

    for name, fn in [
        ("create", create),
        ("stat", stat),
        ("stat, kernel cache dropped", stat_dropped),
        ("ls -l", ls_l),
        ("unlink", unlink),
    ]:
        n, s = timed(fn)
        out[name] = {"ops": n, "secs": s}
    os.rmdir(base)
    return out


def write(d):
    out = {}
    small = os.path.join(d, "small")
    os.mkdir(small)
    data = os.urandom(4096)

    def small_write():
        for i in range(2000):
            fd = os.open(os.path.join(small, f"s{i:04d}"), os.O_CREAT | os.O_WRONLY, 0o644)
            os.write(fd, data)
            os.close(fd)
        return 2000

    n, s = timed(small_write)
    out["4 KiB file write"] = {"ops": n, "secs": s}
    block = os.urandom(MiB)

    def big_write():
        fd = os.open(os.path.join(d, "big"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        for _ in range(1024):
            os.write(fd, block)
        os.fsync(fd)
        os.close(fd)
        return 1024

    n, s = timed(big_write)
    out["1 GiB seq write+fsync"] = {"ops": n, "secs": s, "mib": 1024}
    return out


def read(d):
    out = {}
    small = os.path.join(d, "small")

    def small_read():
        for i in range(2000):
            with open(os.path.join(small, f"s{i:04d}"), "rb") as f:
                assert len(f.read()) == 4096
        return 2000

    n, s = timed(small_read)
    out["4 KiB file read (cold)"] = {"ops": n, "secs": s}

    def big_read():
        fd = os.open(os.path.join(d, "big"), os.O_RDONLY)
        total = 0
        while True:
            b = os.read(fd, MiB)
            if not b:
                break
            total += len(b)
        os.close(fd)
        assert total == 1024 * MiB
        return 1024

    n, s = timed(big_read)
    out["1 GiB seq read (cold)"] = {"ops": n, "secs": s, "mib": 1024}
    rnd = random.Random(7)
    offsets = [rnd.randrange(0, 1024 * MiB - 4096) // 4096 * 4096 for _ in range(2000)]

    def random_read():
        fd = os.open(os.path.join(d, "big"), os.O_RDONLY)
        for off in offsets:
            assert len(os.pread(fd, 4096, off)) == 4096
        os.close(fd)
        return len(offsets)

    n, s = timed(random_read)
    out["4 KiB random read"] = {"ops": n, "secs": s}
    return out


if __name__ == "__main__":
    d, phase = sys.argv[1], sys.argv[2]
    print(json.dumps({"meta": meta, "write": write, "read": read}[phase](d)))
