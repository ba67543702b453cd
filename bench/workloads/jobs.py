#!/usr/bin/env python3
"""Jobs for bench/workloads/run, each timed, printed as JSON.

usage: jobs.py prepare WORK     the sources: WORK/tree (30,000 small files,
                                modes and times of their own), WORK/tree.tar
                                (the same tree), WORK/repo (a git repository
                                of 1,500 files)
       jobs.py run DIR WORK     into DIR: cp -a, rsync -a again, rm -rf,
                                tar x, git clone
"""
import json
import os
import subprocess
import sys
import time

TREE_DIRS, TREE_FILES = 300, 100  # 30,000 files
REPO_DIRS, REPO_FILES = 50, 30  # 1,500 files
MODES = (0o644, 0o600, 0o755, 0o640, 0o444)


def prepare(work):
    tree = os.path.join(work, "tree")
    if not os.path.isdir(tree):
        for d in range(TREE_DIRS):
            sub = os.path.join(tree, f"d{d:03d}")
            os.makedirs(sub)
            for f in range(TREE_FILES):
                path = os.path.join(sub, f"f{f:03d}.txt")
                with open(path, "wb") as out:
                    out.write(os.urandom(256 + (d * f) % 1800))
                os.chmod(path, MODES[(d + f) % len(MODES)])
                t = 1_600_000_000 + d * 1000 + f
                os.utime(path, (t, t))
    tar = os.path.join(work, "tree.tar")
    if not os.path.isfile(tar):
        subprocess.run(["tar", "-C", work, "-cf", tar, "tree"], check=True)
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


def timed(argv, cwd=None):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=cwd)
    return time.perf_counter() - t


def run(d, work):
    files = TREE_DIRS * TREE_FILES
    entries = files + TREE_DIRS + 1
    tree, copy = os.path.join(work, "tree"), os.path.join(d, "tree")
    out = {}
    out["cp -a (30,000 files)"] = {"ops": files, "secs": timed(["cp", "-a", tree, copy])}
    out["rsync -a again"] = {"ops": files, "secs": timed(["rsync", "-a", tree + "/", copy + "/"])}
    out["rm -rf (30,301 entries)"] = {"ops": entries, "secs": timed(["rm", "-rf", copy])}
    out["tar xpf (30,000 files)"] = {
        "ops": files,
        "secs": timed(["tar", "-xpf", os.path.join(work, "tree.tar")], cwd=d),
    }
    out["git clone (1,500 files)"] = {
        "ops": REPO_DIRS * REPO_FILES,
        "secs": timed(["git", "clone", "-q", "--no-local", os.path.join(work, "repo"), os.path.join(d, "repo")]),
    }
    return out


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    elif sys.argv[1] == "run":
        print(json.dumps(run(sys.argv[2], sys.argv[3])))
    else:
        sys.exit(__doc__)
