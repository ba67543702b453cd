#!/usr/bin/env python3
"""Writers and readers on a mount, run in a process of their own while a test
stops and starts PostgreSQL (tests/e2e/tests/crash.rs). A separate process,
because a descriptor open on the mount in the test's own process would be
inherited by every command the test starts, and closed (a FUSE flush) when
that command execs.

  workload.py DIR WRITERS READERS

Writer N creates DIR/wN/fI (4 KiB, content(name)), fsyncs the file, then the
directory, and only then prints "ok wN/fI". Readers read recorded files back
and compare. Every failure is printed as "err ...". On SIGTERM the threads
stop and a last line "latency P50 P99 MAX" (seconds, every operation) is
printed.
"""
import os
import random
import signal
import sys
import threading
import time

SIZE = 4096
PAUSE = 0.005  # between files: leave the machine some room


def content(name):
    unit = (name + ":").encode()
    return (unit * (SIZE // len(unit) + 1))[:SIZE]


def main():
    root, writers, readers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    stop = threading.Event()
    recorded = []
    latencies = []
    lock = threading.Lock()

    def say(line):
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def timed(started):
        with lock:
            latencies.append(time.monotonic() - started)

    def writer(n):
        d = os.path.join(root, "w%d" % n)
        os.makedirs(d, exist_ok=True)
        i = 0
        while not stop.is_set():
            name = "w%d/f%d" % (n, i)
            started = time.monotonic()
            try:
                fd = os.open(os.path.join(root, name), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, content(name))
                    os.fsync(fd)
                finally:
                    os.close(fd)
                dfd = os.open(d, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
                with lock:
                    recorded.append(name)
                say("ok " + name)
            except OSError as e:
                say("err write %s: %s" % (name, e))
            timed(started)
            i += 1
            time.sleep(PAUSE)

    def reader(n):
        rng = random.Random(n)
        while not stop.is_set():
            with lock:
                name = rng.choice(recorded) if recorded else None
            if name is None:
                time.sleep(0.01)
                continue
            started = time.monotonic()
            try:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
                if data != content(name):
                    say("err read %s: %d wrong bytes" % (name, len(data)))
            except OSError as e:
                say("err read %s: %s" % (name, e))
            timed(started)
            time.sleep(PAUSE)

    # (the handler only notes the signal: Event.set() in a handler, which
    # runs in the main thread, deadlocks when the signal lands while that
    # thread holds the Event's lock inside stop.wait(), and the workload
    # then never stops; a failover test hung so)
    terminated = []
    signal.signal(signal.SIGTERM, lambda *_: terminated.append(True))
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    threads += [threading.Thread(target=reader, args=(n,)) for n in range(readers)]
    for t in threads:
        t.start()
    while not terminated:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    lat = sorted(latencies) or [0.0]
    say("latency %.4f %.4f %.4f" % (lat[len(lat) // 2], lat[int((len(lat) - 1) * 0.99)], lat[-1]))


if __name__ == "__main__":
    main()
