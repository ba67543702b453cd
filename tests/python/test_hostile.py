"""Hostile arguments through the Python package, answered as the mount answers them.

The core's random hostile-argument run (tests/e2e/tests/hostile.rs) made
through ``jfs.Client`` and, alike, through ``os`` on the FUSE mount of the
same volume: names of 255 and 256 bytes, not UTF-8 (as Python spells them,
``os.fsdecode`` of the bytes), ".", "..", with control characters;
symlinks in loops and with targets of 4095 and 4096 bytes; trailing
slashes; modes with file-type and unknown bits; times at the ends of an
i64 of nanoseconds; ids of 32 bits and past them; offsets and lengths
near every power of two up to 2**63, and negative ones. Each call must answer as the mount answers
(the same errno, or success), a file written at hostile offsets must hold
the same bytes as its twin written through the mount, and the two
directories must list the same names. A failure prints the seed and the
last calls; ``JFS_HOSTILE_SEED=N`` reruns one, ``JFS_HOSTILE_OPS=N`` sets
the length.
"""
import errno
import os
import random
import stat
import uuid

import pytest

import jfs

NAMES = [
    b"plain",
    b"n" * 255,
    b"n" * 256,
    b"m" * 254,
    b"\xff\xfe not utf-8 \xc3",
    b".",
    b"..",
    b"...",
    b"line\nbreak\ttab",
    b" ",
    b"-rf",
    "caf\u00e9 \U0001F600".encode(),
    b"plain/",
    b"-rf//",
]

# (0x7FFFFFFF: every bit os.chmod passes on; the kernel keeps 0o7777 of them)
MODES = [0o644, 0o7777, 0o170644, 0o100600, 0x7FFFFFFF, 0o4755]


def hostile_offset(rng):
    """An offset near a power of two, up to 2**63 - 1, or a negative one."""
    if rng.randrange(20) == 0:
        return -rng.choice([1, 2, 2**63])
    k = rng.randrange(64)
    base = 2**63 - 1 if k == 63 else 2**k
    return min(max(base + rng.choice([-3, -2, -1, 0, 1, 2]), 0), 2**63 - 1)


def answer(call):
    """What a call answered: ("ok", value), or the errno of its OSError."""
    try:
        return ("ok", call())
    except OSError as e:
        return ("errno", errno.errorcode.get(e.errno, e.errno))
    except (OverflowError, ValueError, TypeError, UnicodeError) as e:
        # the os module's own refusals of arguments it cannot pass on
        return ("refused", type(e).__name__)


def same(said, through_jfs, through_mount):
    # both refused before reaching a file system (a negative size, say) is
    # the same answer whatever Python error says it
    if through_jfs[0] == "refused" and through_mount[0] in ("refused", "errno"):
        assert through_mount[0] == "refused" or through_mount[1] == "EINVAL", (
            f"{said}: jfs.Client {through_jfs}, mount {through_mount}"
        )
        return
    assert through_jfs == through_mount, f"{said}: jfs.Client {through_jfs}, mount {through_mount}"


def kind(mode):
    return stat.S_IFMT(mode), stat.S_IMODE(mode)


def run(client, mount, seed, ops):
    rng = random.Random(seed)
    run_dir = f"run-{uuid.uuid4().hex[:8]}"
    jroot = f"/{run_dir}-py"
    mroot = os.path.join(mount, f"{run_dir}-mnt").encode()
    client.mkdir(jroot, 0o755)
    os.mkdir(mroot, 0o755)

    def jpath(name):
        return f"{jroot}/{os.fsdecode(name)}"

    def mpath(name):
        return mroot + b"/" + name

    jfh, _ = client.open(jpath(b"data"), os.O_RDWR | os.O_CREAT, 0o644)
    mfd = os.open(mpath(b"data"), os.O_RDWR | os.O_CREAT, 0o644)
    written = []
    trail = []
    for op in range(ops):
        name = rng.choice(NAMES)
        what = rng.randrange(12)
        said = f"seed {seed}, op {op}: {what} {name!r}"
        trail = (trail + [said])[-12:]
        context = f"{said}; last ops {trail}"
        if what == 0:
            def create(open_, close, path):
                return answer(lambda: close(open_(path)))
            same(
                context,
                create(lambda p: client.open(p, os.O_WRONLY | os.O_CREAT, 0o644)[0],
                       client.release, jpath(name)),
                create(lambda p: os.open(p, os.O_WRONLY | os.O_CREAT, 0o644), os.close,
                       mpath(name)),
            )
        elif what == 1:
            same(context, answer(lambda: client.mkdir(jpath(name), 0o755)),
                 answer(lambda: os.mkdir(mpath(name), 0o755)))
        elif what == 2:
            target = rng.choice([b"t" * 4095, b"t" * 4096, b"loop-b", name])
            same(context,
                 answer(lambda: client.symlink(os.fsdecode(target), jpath(name))),
                 answer(lambda: os.symlink(target, mpath(name))))
            answer(lambda: client.symlink("loop-a", jpath(b"loop-b")))
            answer(lambda: client.symlink("loop-b", jpath(b"loop-a")))
            answer(lambda: os.symlink(b"loop-a", mpath(b"loop-b")))
            answer(lambda: os.symlink(b"loop-b", mpath(b"loop-a")))
            same(context, answer(lambda: kind(client.stat(jpath(name))[1])),
                 answer(lambda: kind(os.stat(mpath(name)).st_mode)))
            j = answer(lambda: os.fsencode(client.readlink(jpath(name))))
            m = answer(lambda: os.readlink(mpath(name)))
            same(context + " (readlink)", j, m)
        elif what == 3:
            offset = hostile_offset(rng)
            data = bytes(rng.randrange(256) for _ in range(1 + rng.randrange(3)))
            j = answer(lambda: client.pwrite(jfh, offset, data))
            m = answer(lambda: os.pwrite(mfd, data, offset))
            same(context + f" (pwrite of {len(data)} at {offset})", j, m)
            if m[0] == "ok":
                written.append((offset, m[1]))
        elif what == 4:
            length = hostile_offset(rng)
            same(context + f" (truncate to {length})",
                 answer(lambda: client.truncate(jpath(b"data"), length)),
                 answer(lambda: os.truncate(mpath(b"data"), length)))
        elif what == 5:
            offset = hostile_offset(rng)
            same(context + f" (pread at {offset})",
                 answer(lambda: bytes(client.pread(jfh, offset, 8))),
                 answer(lambda: os.pread(mfd, 8, offset)))
        elif what == 6:
            src, dst = rng.choice([(b"dir", b"dir/sub/moved"), (b"dir", b"."),
                                   (b"full", b"dir"), (name, b"plain")])
            for root, mkdir in ((jroot, client.mkdir), (None, os.mkdir)):
                for d in (b"dir", b"dir/sub", b"full", b"full/x"):
                    if root is None:
                        answer(lambda: mkdir(mpath(d), 0o755))
                    else:
                        answer(lambda: mkdir(jpath(d), 0o755))
            same(context + f" (rename {src!r} to {dst!r})",
                 answer(lambda: client.rename(jpath(src), jpath(dst))),
                 answer(lambda: os.rename(mpath(src), mpath(dst))))
        elif what == 7:
            if rng.randrange(2):
                same(context, answer(lambda: client.rmdir(jpath(name))),
                     answer(lambda: os.rmdir(mpath(name))))
            else:
                same(context, answer(lambda: client.unlink(jpath(name))),
                     answer(lambda: os.unlink(mpath(name))))
        elif what == 8:
            mode = rng.choice(MODES)
            same(context + f" (chmod {mode:o})",
                 answer(lambda: client.chmod(jpath(name), mode)),
                 answer(lambda: os.chmod(mpath(name), mode)))
            same(context + " (stat after chmod)",
                 answer(lambda: kind(client.stat(jpath(name))[1])),
                 answer(lambda: kind(os.stat(mpath(name)).st_mode)))
        elif what == 10:
            # times at the ends of what a 64-bit count of nanoseconds holds
            ns = rng.choice([0, -1, 1, 2**31, 2**32, 2**62, 2**63 - 1, -2**63, 10**18 + 5])
            same(context + f" (utime {ns})",
                 answer(lambda: client.utime(jpath(name), ns, ns)),
                 answer(lambda: os.utime(mpath(name), ns=(ns, ns))))
            same(context + f" (mtime after utime {ns})",
                 answer(lambda: client.stat(jpath(name))[6]),
                 answer(lambda: os.stat(mpath(name)).st_mtime_ns))
        elif what == 11:
            # (-1 leaves an id as it is; ids are 32 bits)
            uid = rng.choice([-1, 0, 1000, 2**31 - 1, 2**32 - 2, 2**32 - 1, 2**32])
            same(context + f" (chown {uid})",
                 answer(lambda: client.chown(jpath(name), uid, -1)),
                 answer(lambda: os.chown(mpath(name), uid, -1)))
            same(context + f" (uid after chown {uid})",
                 answer(lambda: client.stat(jpath(name))[2]),
                 answer(lambda: os.stat(mpath(name)).st_uid))
        else:
            same(context + " (lstat)",
                 answer(lambda: kind(client.stat(jpath(name), False)[1])),
                 answer(lambda: kind(os.lstat(mpath(name)).st_mode)))

    client.fsync(jfh)
    client.release(jfh)
    os.close(mfd)
    # the same bytes around every write, read back through the mount
    jdata = os.path.join(mount, f"{run_dir}-py", "data")
    with open(jdata, "rb") as jf, open(mpath(b"data"), "rb") as mf:
        assert os.fstat(jf.fileno()).st_size == os.fstat(mf.fileno()).st_size, f"seed {seed}"
        for offset, n in written:
            start = max(offset - 1, 0)
            assert os.pread(jf.fileno(), n + 2, start) == os.pread(mf.fileno(), n + 2, start), (
                f"seed {seed}: bytes at {start}"
            )
    # the same names, listed by the package as os.listdir lists them
    listed = sorted(name for name, _ in client.listdir(jroot))
    assert listed == sorted(os.fsdecode(n) for n in os.listdir(mroot)), f"seed {seed}"


def test_hostile_arguments_answer_as_the_mount_does(meta_url, mount):
    client = jfs.Client(meta_url)
    ops = int(os.environ.get("JFS_HOSTILE_OPS", "600"))
    seeds = ([int(os.environ["JFS_HOSTILE_SEED"])] if "JFS_HOSTILE_SEED" in os.environ
             else [1, 2, random.randrange(2**32)])
    try:
        for seed in seeds:
            print(f"hostile run through the package: seed {seed}, {ops} ops")
            run(client, mount, seed, ops)
    finally:
        client.close()


def test_reads_of_any_length_answer_what_the_file_holds(meta_url, scratch):
    client = jfs.Client(meta_url)
    try:
        fh, _ = client.open(f"{scratch}/small", os.O_RDWR | os.O_CREAT, 0o644)
        client.pwrite(fh, 0, b"twelve bytes")
        # a length no buffer could hold asks for what is there, no more
        for size in (2**31, 2**40, 2**62, 2**63 - 1):
            assert bytes(client.pread(fh, 0, size)) == b"twelve bytes", size
        for size in (2**31, 2**40, 2**62):
            assert bytes(client.pread(fh, 2**61, size)) == b"", size
        # a range ending past 2**63 - 1 is EINVAL, as os.pread answers it
        for offset, size in ((2**62, 2**63 - 1), (2**63 - 1, 1)):
            with pytest.raises(OSError) as refused:
                client.pread(fh, offset, size)
            assert refused.value.errno == errno.EINVAL, (offset, size)
        client.release(fh)
    finally:
        client.close()
