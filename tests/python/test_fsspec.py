"""fsspec's own abstract tests (copy, get, put, open, pipe) on a jfs volume,
and the fsspec API a data pipeline uses (ls, info, open with buffering,
cat_file ranges, mv, rm) checked against what the calls must give."""
import os
import uuid

import fsspec
import fsspec.tests.abstract as abstract
import pytest

import jfs


class JfsFixtures(abstract.AbstractFixtures):
    @pytest.fixture(scope="class")
    def fs(self):
        return jfs.FileSystem(os.environ["JFS_META_URL"])

    @pytest.fixture
    def fs_path(self, fs):
        path = f"/abstract-{uuid.uuid4().hex[:12]}"
        fs.mkdir(path)
        yield path
        fs.rm(path, recursive=True)


class TestJfsCopy(abstract.AbstractCopyTests, JfsFixtures):
    pass


class TestJfsGet(abstract.AbstractGetTests, JfsFixtures):
    pass


class TestJfsPut(abstract.AbstractPutTests, JfsFixtures):
    pass


class TestJfsOpen(abstract.AbstractOpenTests, JfsFixtures):
    pass


class TestJfsPipe(abstract.AbstractPipeTests, JfsFixtures):
    pass


def test_the_protocol_is_registered(meta_url, scratch):
    fsspec.open(f"jfs://{scratch}/a.txt", "wb", meta=meta_url).__enter__().close()
    with fsspec.open(f"jfs://{scratch}/b.txt", "wt", meta=meta_url) as f:
        f.write("x,y\n1,2\n")
    with fsspec.open(f"jfs://{scratch}/b.txt", "rt", meta=meta_url) as f:
        assert f.read() == "x,y\n1,2\n"
    fs = fsspec.filesystem("jfs", meta=meta_url)
    assert isinstance(fs, jfs.FileSystem)
    assert sorted(fs.ls(scratch, detail=False)) == [f"{scratch}/a.txt", f"{scratch}/b.txt"]


def test_info_ls_and_ranges(volume, scratch):
    data = bytes(range(256)) * 4096  # 1 MiB
    volume.pipe_file(f"{scratch}/f", data)
    volume.mkdir(f"{scratch}/d")
    info = volume.info(f"{scratch}/f")
    assert (info["type"], info["size"], info["name"]) == ("file", len(data), f"{scratch}/f")
    assert volume.info(f"{scratch}/d")["type"] == "directory"
    listed = {i["name"]: i["type"] for i in volume.ls(scratch)}
    assert listed == {f"{scratch}/f": "file", f"{scratch}/d": "directory"}
    assert volume.cat_file(f"{scratch}/f") == data
    assert volume.cat_file(f"{scratch}/f", 1000, 5000) == data[1000:5000]
    assert volume.cat_file(f"{scratch}/f", -10) == data[-10:]
    assert volume.cat_file(f"{scratch}/f", 10, -10) == data[10:-10]
    assert volume.cat_file(f"{scratch}/f", len(data) + 5) == b""
    with volume.open(f"{scratch}/f", "rb", block_size=4096) as f:
        f.seek(300000)
        assert f.read(10) == data[300000:300010]
        assert f.tell() == 300010
    with pytest.raises(FileNotFoundError):
        volume.info(f"{scratch}/missing")
    with pytest.raises(FileNotFoundError):
        volume.cat_file(f"{scratch}/missing")
    with pytest.raises(NotADirectoryError):
        volume.info(f"{scratch}/f/x")
    with pytest.raises(FileExistsError):
        volume.open(f"{scratch}/f", "xb")
    with pytest.raises(IsADirectoryError):
        volume.open(f"{scratch}/d", "rb")


def test_buffered_writes_append_and_large_files(volume, scratch):
    path = f"{scratch}/big"
    chunk = os.urandom(1 << 20)
    with volume.open(path, "wb", block_size=3 << 20) as f:
        for _ in range(20):
            f.write(chunk)
    assert volume.size(path) == 20 << 20
    with volume.open(path, "ab") as f:
        f.write(b"tail")
    data = volume.cat_file(path)
    assert data == chunk * 20 + b"tail"


def test_mv_rm_mkdir_and_copy(volume, scratch):
    volume.makedirs(f"{scratch}/a/b/c", exist_ok=True)
    volume.pipe_file(f"{scratch}/a/b/c/f", b"1")
    with pytest.raises(FileExistsError):
        volume.makedirs(f"{scratch}/a/b", exist_ok=False)
    volume.mv(f"{scratch}/a", f"{scratch}/z")
    assert volume.cat_file(f"{scratch}/z/b/c/f") == b"1"
    assert not volume.exists(f"{scratch}/a")
    volume.mkdir(f"{scratch}/into")
    volume.mv(f"{scratch}/z", f"{scratch}/into")
    assert volume.cat_file(f"{scratch}/into/z/b/c/f") == b"1"
    volume.cp_file(f"{scratch}/into/z/b/c/f", f"{scratch}/copy")
    assert volume.cat_file(f"{scratch}/copy") == b"1"
    with pytest.raises(OSError):
        volume.rmdir(f"{scratch}/into")
    with pytest.raises(IsADirectoryError):
        volume.rm(f"{scratch}/into")
    volume.rm(f"{scratch}/into", recursive=True)
    assert volume.ls(scratch, detail=False) == [f"{scratch}/copy"]
    volume.rm(f"{scratch}/copy")
    assert volume.ls(scratch, detail=False) == []


def test_symlinks_resolve_inside_the_volume(volume, scratch):
    volume.makedirs(f"{scratch}/real/sub", exist_ok=True)
    volume.pipe_file(f"{scratch}/real/sub/f", b"through links")
    volume.symlink("real", f"{scratch}/rel")
    volume.symlink(f"{scratch}/real/sub", f"{scratch}/abs")
    assert volume.cat_file(f"{scratch}/rel/sub/f") == b"through links"
    assert volume.cat_file(f"{scratch}/abs/f") == b"through links"
    info = volume.info(f"{scratch}/rel")
    assert info["islink"] and info["type"] == "directory" and info["destination"] == "real"
    volume.symlink("loop", f"{scratch}/loop")
    with pytest.raises(OSError) as e:
        volume.cat_file(f"{scratch}/loop")
    assert e.value.errno == 40  # ELOOP


def test_pandas_and_pyarrow_read_through_fsspec(meta_url, volume, scratch):
    import pandas as pd
    import pyarrow.dataset as ds

    frame = pd.DataFrame({"id": range(1000), "name": [f"n{i}" for i in range(1000)]})
    opts = {"meta": meta_url}
    frame.to_csv(f"jfs://{scratch}/t.csv", index=False, storage_options=opts)
    back = pd.read_csv(f"jfs://{scratch}/t.csv", storage_options=opts)
    assert back.equals(frame)
    volume.mkdir(f"{scratch}/parts")
    for i in range(3):
        part = frame.iloc[i * 300:(i + 1) * 300]
        part.to_parquet(f"jfs://{scratch}/parts/{i}.parquet", storage_options=opts)
    table = ds.dataset(f"{scratch}/parts", format="parquet", filesystem=volume).to_table()
    assert table.num_rows == 900
    assert sorted(table.column("id").to_pylist()) == list(range(900))


def test_links_copies_onto_themselves_and_removing_a_linked_tree(volume, scratch):
    volume.makedirs(f"{scratch}/data", exist_ok=True)
    volume.pipe_file(f"{scratch}/data/x", b"target")
    # a relative link to an absolute one: the absolute one reads from the root
    volume.mkdir(f"{scratch}/d")
    volume.symlink(f"{scratch}/data/x", f"{scratch}/d/g")
    volume.symlink("g", f"{scratch}/d/f")
    assert volume.cat_file(f"{scratch}/d/f") == b"target"
    # a copy onto itself (or its link) keeps it
    volume.cp_file(f"{scratch}/data/x", f"{scratch}/data/x")
    volume.cp_file(f"{scratch}/data/x", f"{scratch}/d/g")
    assert volume.cat_file(f"{scratch}/data/x") == b"target"
    # removing a link to a directory, recursively, removes the link only
    volume.symlink(f"{scratch}/data", f"{scratch}/link")
    volume.rm(f"{scratch}/link", recursive=True)
    assert not volume.exists(f"{scratch}/link")
    assert volume.cat_file(f"{scratch}/data/x") == b"target"
