"""The package and a FUSE mount of the same volume: each sees what the other
committed (close-to-open), byte for byte, and each other's locks."""
import fcntl
import hashlib
import os
import subprocess
import time


def wait_for(check, seconds=10):
    deadline = time.monotonic() + seconds
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise AssertionError("not seen in time")
        time.sleep(0.02)


def test_written_by_the_package_read_through_the_mount(volume, mount, scratch):
    data = os.urandom((9 << 20) + 12345)  # crosses blocks and chunks
    with volume.open(f"{scratch}/from-package", "wb") as f:
        f.write(data[: 5 << 20])
        f.write(data[5 << 20:])
    volume.pipe_file(f"{scratch}/small", b"tiny")
    volume.makedirs(f"{scratch}/d/e", exist_ok=True)
    local = os.path.join(mount, scratch.lstrip("/"))
    with open(os.path.join(local, "from-package"), "rb") as f:
        got = f.read()
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    assert open(os.path.join(local, "small"), "rb").read() == b"tiny"
    assert os.path.isdir(os.path.join(local, "d/e"))
    st = os.stat(os.path.join(local, "from-package"))
    info = volume.info(f"{scratch}/from-package")
    assert (st.st_size, st.st_ino, st.st_mode) == (info["size"], info["ino"], info["mode"])


def test_written_through_the_mount_read_by_the_package(volume, mount, scratch):
    local = os.path.join(mount, scratch.lstrip("/"))
    data = os.urandom((6 << 20) + 777)
    with open(os.path.join(local, "from-mount"), "wb") as f:
        f.write(data)
    os.makedirs(os.path.join(local, "x/y"))
    subprocess.run(["cp", "-a", "/etc/hostname", os.path.join(local, "x/y/h")], check=True)
    got = volume.cat_file(f"{scratch}/from-mount")
    assert got == data
    assert volume.cat_file(f"{scratch}/x/y/h") == open("/etc/hostname", "rb").read()
    # a change the package has cached shows once the mount changes it
    assert volume.ls(f"{scratch}/x/y", detail=False) == [f"{scratch}/x/y/h"]
    os.rename(os.path.join(local, "x/y/h"), os.path.join(local, "x/y/h2"))
    wait_for(lambda: volume.ls(f"{scratch}/x/y", detail=False) == [f"{scratch}/x/y/h2"])
    with open(os.path.join(local, "from-mount"), "r+b") as f:
        f.write(b"CHANGED")
    got = volume.cat_file(f"{scratch}/from-mount", 0, 7)
    assert got == b"CHANGED"


def test_locks_are_shared_with_the_mount(volume, mount, scratch):
    volume.pipe_file(f"{scratch}/locked", b"x")
    local = os.path.join(mount, scratch.lstrip("/"), "locked")
    with volume.open(f"{scratch}/locked", "ab") as f:
        f.lock("w")
        with open(local, "rb") as g:
            try:
                fcntl.lockf(g, fcntl.LOCK_SH | fcntl.LOCK_NB)
                raise AssertionError("the mount took a lock the package holds")
            except OSError:
                pass
        f.lock("u")
        with open(local, "r+b") as g:
            fcntl.lockf(g, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with volume.open(f"{scratch}/locked", "rb") as h:
                try:
                    h.lock("r", wait=False)
                    raise AssertionError("the package took a lock the mount holds")
                except BlockingIOError:
                    pass


def test_closing_drops_locks_and_fsync_writes_what_is_buffered(volume, mount, scratch):
    local = os.path.join(mount, scratch.lstrip("/"), "f")
    f = volume.open(f"{scratch}/f", "wb")
    f.write(b"durable")
    f.lock("w")
    f.fsync()
    # what fsync returned for is there for every client, before the close
    wait_for(lambda: os.path.exists(local) and open(local, "rb").read() == b"durable")
    with open(local, "r+b") as g:
        try:
            fcntl.lockf(g, fcntl.LOCK_EX | fcntl.LOCK_NB)
            raise AssertionError("the mount took a lock the package holds")
        except OSError:
            pass
    f.close()  # no unlock: the close drops the lock
    with open(local, "r+b") as g:
        fcntl.lockf(g, fcntl.LOCK_EX | fcntl.LOCK_NB)
