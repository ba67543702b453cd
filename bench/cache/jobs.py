#!/usr/bin/env python3
"""Jobs for bench/cache/run, each timed, printed as JSON.

usage: jobs.py prepare WORK             the sources: WORK/tree (30,000 small
                                        files), WORK/repo (a git repository
                                        of 1,500 files)
       jobs.py tools DIR WORK           git clone, cp -a, rsync -a again, into DIR
       jobs.py staleness A B [N]        two mounts of one volume: time from a
                                        chmod on A to B's kernel showing it,
                                        idle and while A creates files
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time

TREE_DIRS, TREE_FILES = 300, 100  # 30,000 files
REPO_DIRS, REPO_FILES = 50, 30  # 1,500 files


def prepare(work):
    tree = os.path.join(work, "tree")
    if not os.path.isdir(tree):
        for d in range(TREE_DIRS):
            sub = os.path.join(tree, f"d{d:03d}")
            os.makedirs(sub)
            for f in range(TREE_FILES):
                with open(os.path.join(sub, f"f{f:03d}.txt"), "wb") as out:
                    out.write(os.urandom(256 + (d * f) % 1800))
    repo = os.path.join(work, "repo")
    if not os.path.isdir(repo):
        os.makedirs(repo)
        git = lambda *a: subprocess.run(["git", "-C", repo, *a], check=True, capture_output=True)
        git("init", "-q")
        for d in range(REPO_DIRS):
            sub = os.path.join(repo, f"pkg{d:02d}")
            os.makedirs(sub)
            for f in range(REPO_FILES):
                with open(os.path.join(sub, f"m{f:02d}.py"), "w") as out:
                    out.write(f"# module {d}.{f}\n" + "x = 1\n" * (20 + f * 7))
        git("add", "-A")
        git("-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "import")


def timed(argv):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def tools(d, work):
    files = TREE_DIRS * TREE_FILES
    out = {
        "git clone (1,500 files)": {
            "ops": REPO_DIRS * REPO_FILES,
            "secs": timed(["git", "clone", "-q", "--no-local", os.path.join(work, "repo"), os.path.join(d, "repo")]),
        },
        "cp -a (30,000 files)": {
            "ops": files,
            "secs": timed(["cp", "-a", os.path.join(work, "tree"), os.path.join(d, "tree")]),
        },
        "rsync -a again": {
            "ops": files,
            "secs": timed(["rsync", "-a", os.path.join(work, "tree") + "/", os.path.join(d, "tree") + "/"]),
        },
    }
    return out


def mode(path):
    try:
        return os.lstat(path).st_mode & 0o7777
    except FileNotFoundError:
        return None


def staleness(a, b, n):
    f_a, f_b = os.path.join(a, "stale"), os.path.join(b, "stale")
    open(f_a, "w").close()
    while mode(f_b) is None:
        time.sleep(0.001)

    def measure():
        took = []
        for i in range(n):
            want = 0o600 | (0o044 if i % 2 else 0)
            t = time.perf_counter()  # from the call: A's own latency counts
            os.chmod(f_a, want)
            while mode(f_b) != want:
                if time.perf_counter() - t > 10:
                    raise SystemExit(f"change {i} not seen on B within 10 s")
                time.sleep(0.0005)
            took.append((time.perf_counter() - t) * 1000)
            time.sleep(0.01)
        took.sort()
        return {"p50 ms": statistics.median(took), "p99 ms": took[int(len(took) * 0.99) - 1]}

    out = {"idle": measure()}
    load = os.path.join(a, "load")
    os.mkdir(load)
    stop = threading.Event()
    made = [0]

    def creator():
        while not stop.is_set():
            os.close(os.open(os.path.join(load, f"f{made[0]}"), os.O_CREAT | os.O_WRONLY, 0o644))
            made[0] += 1

    t = threading.Thread(target=creator)
    t0 = time.perf_counter()
    t.start()
    try:
        out["under creates"] = measure()
    finally:
        stop.set()
        t.join()
    out["under creates"]["creates/s"] = made[0] / (time.perf_counter() - t0)
    return out


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "prepare":
        prepare(sys.argv[2])
    elif cmd == "tools":
        print(json.dumps(tools(sys.argv[2], sys.argv[3])))
    elif cmd == "staleness":
        print(json.dumps(staleness(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 200)))
    else:
        raise SystemExit(__doc__)
