#!/usr/bin/env python3
"""What a durable close of a small new file costs on this machine, without jfs.

usage: floor.py DIR DSN N

Writes N files of 1,000 bytes in DIR each way, the durable ways taking
turns file by file (the disk's drift falls on all alike), the plain way on
its own first, and prints microseconds per file as JSON:
  plain        create, write, close: what a local directory does for cp -a
  block        the file store's durable put of a new block: a file without
               a name (O_TMPFILE), written, linked, fsync, directory fsync
  block_rename the file store's put before: a temporary file, fdatasync,
               rename, directory fsync
  commit       one PostgreSQL transaction that waits for its WAL flush (an
               INSERT with synchronous_commit on), what a close's data
               commit waits for
  floor        block then commit: the least a close that must survive an
               OS crash costs, before any FUSE call or procedure runs
"""
import ctypes
import json
import os
import subprocess
import sys
import time

AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
libc = ctypes.CDLL(None, use_errno=True)
DATA = os.urandom(1000)


def linkat(src, dst):
    if libc.linkat(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), AT_SYMLINK_FOLLOW):
        raise OSError(ctypes.get_errno(), f"linkat {dst}")


def sync_dir(d):
    fd = os.open(d, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def plain(d, i):
    fd = os.open(f"{d}/{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, DATA)
    os.close(fd)


def block(d, i):
    fd = os.open(d, os.O_WRONLY | os.O_TMPFILE, 0o644)
    os.write(fd, DATA)
    linkat(f"/proc/self/fd/{fd}", f"{d}/{i}")
    os.fsync(fd)
    os.close(fd)
    sync_dir(d)


def block_rename(d, i):
    tmp = f"{d}/{i}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, DATA)
    os.fdatasync(fd)
    os.close(fd)
    os.rename(tmp, f"{d}/{i}")
    sync_dir(d)


class Commit:
    """One psql process fed a durable INSERT per file, answered in turn."""

    def __init__(self, dsn):
        self.p = subprocess.Popen(
            ["psql", "-qXAt", "-v", "ON_ERROR_STOP=1", "-d", dsn],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.send("CREATE TABLE floor_commit (i int); SET synchronous_commit = on; SELECT 1;")

    def send(self, sql):
        self.p.stdin.write(sql + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline()

    def __call__(self, d, i):
        self.send(f"INSERT INTO floor_commit VALUES ({i}); SELECT 1;")


def main():
    d, dsn, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    commit = Commit(dsn)
    # (plain alone: between fsyncs its creates would wait for their journal
    # commits, which a plain directory never makes)
    os.makedirs(f"{d}/plain")
    os.sync()
    t = time.perf_counter()
    for i in range(n):
        plain(f"{d}/plain", i)
    out = {"plain": (time.perf_counter() - t) / n * 1e6}
    ways = {"block": block, "block_rename": block_rename, "commit": commit}
    spent = dict.fromkeys(ways, 0.0)
    for name in ways:
        os.makedirs(f"{d}/{name}")
    for i in range(n):
        for name, way in ways.items():
            t = time.perf_counter()
            way(f"{d}/{name}", i)
            spent[name] += time.perf_counter() - t
    out.update({k: v / n * 1e6 for k, v in spent.items()})
    out["floor"] = out["block"] + out["commit"]
    commit.send("DROP TABLE floor_commit; SELECT 1;")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
