"""bench/scale: timed metadata operations through a mount, one process.

  ops.py create DIR COUNT          creates COUNT empty files in DIR (new)
  ops.py stat ROOT DIRS FILES COUNT SEED
                                   stats COUNT distinct random files
                                   ROOT/dD/fF (D in 1..DIRS, F in 1..FILES)
Prints operations per second.
"""
import os
import random
import sys
import time


def create(directory, count):
    os.mkdir(directory)
    start = time.monotonic()
    for i in range(count):
        os.close(os.open(os.path.join(directory, f"n{i}"), os.O_CREAT | os.O_WRONLY, 0o644))
    return count / (time.monotonic() - start)


def stat(root, dirs, files, count, seed):
    # distinct files, so that no stat is answered by an earlier one's cache
    picked = random.Random(seed).sample(range(dirs * files), count)
    paths = [os.path.join(root, f"d{i // files + 1}", f"f{i % files + 1}") for i in picked]
    start = time.monotonic()
    for path in paths:
        os.stat(path)
    return count / (time.monotonic() - start)


def main():
    what = sys.argv[1]
    if what == "create":
        rate = create(sys.argv[2], int(sys.argv[3]))
    elif what == "stat":
        root, dirs, files, count, seed = sys.argv[2:7]
        rate = stat(root, int(dirs), int(files), int(count), int(seed))
    else:
        sys.exit(f"unknown operation {what!r}: create or stat")
    print(f"{rate:.0f}")


if __name__ == "__main__":
    main()
