"""jfs without FUSE: a jfs volume used from Python.

``jfs.FileSystem("postgres://...")`` attaches to the volume whose metadata
that database holds, as a mount does (a session of its own, the change log
followed, writes committed at close), and is an fsspec file system
registered under the protocol ``jfs``: ``fsspec.open("jfs://data/x.csv",
meta="postgres://...")``. ``jfs.Client`` is the lower layer it is built on:
paths, ``os.open`` flags and file handles.
"""
from ._jfs import Client, __version__
from .spec import JfsFile, JfsFileSystem

FileSystem = JfsFileSystem

__all__ = ["Client", "FileSystem", "JfsFile", "JfsFileSystem", "__version__"]
