"""Fixtures of the Python package's tests: the volume (JFS_META_URL, as the
client role), its admin URL (JFS_TEST_ADMIN_URL) and a FUSE mount of it
(JFS_TEST_MOUNT) and the reader role's URL (JFS_TEST_READER_URL), all made by tests/e2e/tests/python.rs."""
import os
import uuid

import pytest

import jfs


@pytest.fixture(scope="session")
def meta_url():
    return os.environ["JFS_META_URL"]


@pytest.fixture(scope="session")
def admin_url():
    return os.environ["JFS_TEST_ADMIN_URL"]


@pytest.fixture(scope="session")
def reader_url():
    """The reader role's URL: SQL over the volume's tables."""
    return os.environ["JFS_TEST_READER_URL"]


@pytest.fixture(scope="session")
def mount():
    return os.environ["JFS_TEST_MOUNT"]


@pytest.fixture(scope="session")
def volume(meta_url):
    fs = jfs.FileSystem(meta_url)
    yield fs


@pytest.fixture
def scratch(volume):
    """A fresh directory of the volume, removed afterwards."""
    path = f"/t-{uuid.uuid4().hex[:12]}"
    volume.mkdir(path)
    yield path
    volume.rm(path, recursive=True)
