"""The package on a volume over shards, beside a FUSE mount of it
(JFS_TEST_SHARDS names the shard roots of the volume's root and their
shards, "a:1 c:2"): each file lands on its directory's shard and both
clients see it; what crosses shards answers EXDEV, and mv and copy move
the bytes instead, as between two file systems."""
import errno
import os

import pytest


def shard_roots():
    return {name: int(shard) for name, shard in
            (pair.split(":") for pair in os.environ["JFS_TEST_SHARDS"].split())}


def shard_of(ino):
    return ino >> 48


def test_files_land_on_their_directory_shard(volume, mount):
    for name, shard in shard_roots().items():
        data = os.urandom((5 << 20) + shard)
        volume.makedirs(f"/{name}/py/d", exist_ok=True)
        volume.pipe_file(f"/{name}/py/d/file", data)
        assert shard_of(volume.info(f"/{name}")["ino"]) == shard
        assert shard_of(volume.info(f"/{name}/py/d")["ino"]) == shard
        assert shard_of(volume.info(f"/{name}/py/d/file")["ino"]) == shard
        with open(os.path.join(mount, name, "py/d/file"), "rb") as f:
            assert f.read() == data
        st = os.stat(os.path.join(mount, name, "py/d/file"))
        assert st.st_ino == volume.info(f"/{name}/py/d/file")["ino"]
    listed = set(volume.ls("/", detail=False))
    assert {f"/{name}" for name in shard_roots()} <= listed
    assert all(volume.isdir(f"/{name}") for name in shard_roots())


def test_what_crosses_shards_is_refused_or_copied(volume, mount):
    (one, _), (two, _) = list(shard_roots().items())[:2]
    volume.pipe_file(f"/{one}/cross", b"bytes that move")
    with pytest.raises(OSError) as refused:
        volume.client.rename(f"/{one}/cross", f"/{two}/cross")
    assert refused.value.errno == errno.EXDEV
    with pytest.raises(OSError) as refused:
        volume.client.rename(f"/{one}", "/moved")
    assert refused.value.errno == errno.EXDEV
    # mv and copy move the bytes between shards
    volume.copy(f"/{one}/cross", f"/{two}/copied")
    assert volume.cat_file(f"/{two}/copied") == b"bytes that move"
    assert shard_of(volume.info(f"/{two}/copied")["ino"]) == shard_roots()[two]
    volume.mv(f"/{one}/cross", f"/{two}/moved")
    assert not volume.exists(f"/{one}/cross")
    assert volume.cat_file(f"/{two}/moved") == b"bytes that move"
    with open(os.path.join(mount, two, "moved"), "rb") as f:
        assert f.read() == b"bytes that move"
    # a tree too
    volume.makedirs(f"/{one}/tree/x", exist_ok=True)
    volume.pipe_file(f"/{one}/tree/x/leaf", b"leaf")
    volume.mv(f"/{one}/tree", f"/{two}/tree")
    assert volume.cat_file(f"/{two}/tree/x/leaf") == b"leaf"
    assert not volume.exists(f"/{one}/tree")


def test_statfs_counts_every_shard(volume):
    _, _, used_before, _ = volume.client.statfs()
    (one, _), (two, _) = list(shard_roots().items())[:2]
    volume.pipe_file(f"/{one}/counted", b"1")
    volume.pipe_file(f"/{two}/counted", b"2")
    _, _, used_after, _ = volume.client.statfs()
    assert used_after == used_before + 2
