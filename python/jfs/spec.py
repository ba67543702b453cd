"""The fsspec file system of a jfs volume (protocol ``jfs``)."""
import atexit
import datetime
import errno
import io
import multiprocessing.util
import os
import stat
import threading

from fsspec.spec import AbstractBufferedFile, AbstractFileSystem
from fsspec.utils import stringify_path

from ._jfs import Client


def _write_all(client, fh, offset, data):
    """Writes all of ``data`` (a write short of it, where the largest file
    ends, is EFBIG: no byte of a file is dropped unsaid)."""
    written = client.pwrite(fh, offset, data)
    if written != len(data):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

#: where the metadata URL comes from when none is given
META_URL_ENV = "JFS_META_URL"

#: bytes moved per call by put_file, get_file and large reads
CHUNK = 4 << 20

class _Clients:
    """The clients of this process, whose sessions end when it exits. A
    fork (a DataLoader worker) attaches again at its first call; a
    multiprocessing worker ends with os._exit after its finalizers, so its
    sessions end there (atexit ends them in other processes)."""

    def __init__(self):
        self.clients = {}
        self.lock = threading.Lock()

    def get(self, meta, options):
        """The client of `meta` with `options`, made at the first call: one
        per process (fsspec makes a file system per thread; they share it)."""
        key = (meta, tuple(sorted(options.items())))
        with self.lock:
            client = self.clients.get(key)
            if client is None:
                client = self.clients[key] = Client(meta, **options)
            return client

    def close_all(self):
        with self.lock:
            clients = list(self.clients.values())
        for client in clients:
            client.close()

    def after_fork(self):
        # (a thread of the parent may have held the lock)
        self.lock = threading.Lock()

    def in_worker(self):
        multiprocessing.util.Finalize(self, self.close_all, exitpriority=100)


_clients = _Clients()
atexit.register(_clients.close_all)
os.register_at_fork(after_in_child=_clients.after_fork)
multiprocessing.util.register_after_fork(_clients, _Clients.in_worker)


def _kind(mode):
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _info(path, st):
    ino, mode, uid, gid, size, atime, mtime, ctime, nlink = st
    return {
        "name": path,
        "size": size,
        "type": _kind(mode),
        "mode": mode,
        "uid": uid,
        "gid": gid,
        "nlink": nlink,
        "ino": ino,
        "atime": atime / 1e9,
        "mtime": mtime / 1e9,
        "ctime": ctime / 1e9,
        "islink": stat.S_ISLNK(mode),
    }


class JfsFileSystem(AbstractFileSystem):
    """A jfs volume, attached to by this process (no FUSE mount needed).

    ``meta`` is the PostgreSQL URL of the volume's metadata (default: the
    ``JFS_META_URL`` environment variable). Paths are absolute within the
    volume ("/a/b", or "jfs://a/b"). The other options are a mount's:
    ``read_only``, ``subdir``, ``cache_dir``, ``cache_size_mib``,
    ``buffer_size_mib``, ``max_connections``, ``changes_poll``,
    ``commit_after``, ``umask``. Requests act as this process's user and
    groups (its supplementary ones too), checked by the permission bits and,
    on a volume with ACLs on, the ACLs as the kernel checks them; root may
    give ``uid``, ``gid`` and ``groups`` to act as another. Writes make missing parent directories
    (``auto_mkdir``, on by default), as object stores do.
    """

    protocol = "jfs"
    root_marker = "/"

    def __init__(self, meta=None, **options):
        super().__init__(meta=meta, **options)
        self.auto_mkdir = options.get("auto_mkdir", True)
        meta = meta or os.environ.get(META_URL_ENV)
        if not meta:
            raise ValueError(
                f"jfs: give the volume's metadata URL (meta='postgres://...') "
                f"or set {META_URL_ENV}"
            )
        known = {
            "read_only", "subdir", "cache_dir", "cache_size_mib", "buffer_size_mib",
            "max_connections", "changes_poll", "commit_after", "umask", "uid", "gid",
            "groups", "describe",
        }
        client_options = {k: v for k, v in options.items() if k in known}
        if client_options.get("groups") is not None:
            # (a key of the per-process client cache: hashable)
            client_options["groups"] = tuple(client_options["groups"])
        self.client = _clients.get(meta, client_options)

    @classmethod
    def _strip_protocol(cls, path):
        path = stringify_path(path)
        if path.startswith("jfs://"):
            path = path[len("jfs://"):]
        path = "/" + path.strip("/")
        while "//" in path:
            path = path.replace("//", "/")
        return path

    def unstrip_protocol(self, name):
        return "jfs://" + name.lstrip("/")

    @staticmethod
    def _get_kwargs_from_urls(path):
        return {}

    # --- metadata ---------------------------------------------------------

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        st = self.client.stat(path, False)
        info = _info(path, st)
        if info["islink"]:
            info["destination"] = self.client.readlink(path)
            try:
                target = _info(path, self.client.stat(path, True))
                target["islink"] = True
                target["destination"] = info["destination"]
                return target
            except OSError:
                pass  # dangling, a loop, or not ours to read: the link itself
        return info

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        try:
            entries = self.client.listdir(path)
        except NotADirectoryError:
            entries = None
        if entries is None:
            infos = [self.info(path)]
        else:
            base = path.rstrip("/")
            infos = []
            for name, st in entries:
                full = f"{base}/{name}"
                info = _info(full, st)
                if info["islink"]:
                    info = self.info(full)
                infos.append(info)
        return infos if detail else [i["name"] for i in infos]

    def exists(self, path, **kwargs):
        try:
            self.client.stat(self._strip_protocol(path), True)
            return True
        except FileNotFoundError:
            return False
        except NotADirectoryError:
            return False

    def isdir(self, path):
        try:
            return self.info(path)["type"] == "directory"
        except OSError:
            return False

    def isfile(self, path):
        try:
            return self.info(path)["type"] == "file"
        except OSError:
            return False

    def mkdir(self, path, create_parents=True, **kwargs):
        path = self._strip_protocol(path)
        if create_parents:
            if self.exists(path):
                raise FileExistsError(errno.EEXIST, "File exists", path)
            self.makedirs(path, exist_ok=True)
        else:
            self.client.mkdir(path, kwargs.get("mode", 0o777))

    def makedirs(self, path, exist_ok=False):
        path = self._strip_protocol(path)
        if path == "/":
            if exist_ok:
                return
            raise FileExistsError(errno.EEXIST, "File exists", path)
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            last = i == len(parts)
            try:
                self.client.mkdir(sub)
            except FileExistsError:
                if last and not exist_ok:
                    raise
                if not self.isdir(sub):
                    raise FileExistsError(errno.EEXIST, "File exists (not a directory)", sub)

    def rmdir(self, path):
        self.client.rmdir(self._strip_protocol(path))

    def rm_file(self, path):
        self.client.unlink(self._strip_protocol(path))

    def _rm(self, path):
        path = self._strip_protocol(path)
        if stat.S_ISDIR(self.client.stat(path, False)[1]):
            self.client.rmdir(path)
        else:
            self.client.unlink(path)

    def rm(self, path, recursive=False, maxdepth=None):
        if isinstance(path, str):
            path = [path]
        for p in path:
            p = self._strip_protocol(p)
            if recursive and stat.S_ISDIR(self.client.stat(p, False)[1]):
                if p == "/":
                    raise ValueError("jfs: refusing to remove the root of the volume")
                self._rm_tree(p)
            else:
                st = self.client.stat(p, False)
                if stat.S_ISDIR(st[1]):
                    if not recursive:
                        raise IsADirectoryError(errno.EISDIR, "Is a directory", p)
                    self.client.rmdir(p)
                else:
                    self.client.unlink(p)

    def _rm_tree(self, path):
        for name, st in self.client.listdir(path):
            full = f"{path.rstrip('/')}/{name}"
            if stat.S_ISDIR(st[1]):
                self._rm_tree(full)
            else:
                self.client.unlink(full)
        self.client.rmdir(path)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        if not isinstance(path1, str) or not isinstance(path2, str):
            return super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
        src = self._strip_protocol(path1)
        dst = self._strip_protocol(path2)
        if self.isdir(dst) and src != dst:
            dst = f"{dst.rstrip('/')}/{src.rsplit('/', 1)[-1]}"
        try:
            self.client.rename(src, dst)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            # between two shards of the volume, as between two file
            # systems (mv(1)'s way): copied, then removed
            tree = self.isdir(src)
            super().mv(src, dst, recursive=tree, maxdepth=maxdepth, **kwargs)

    def cp_file(self, path1, path2, **kwargs):
        src = self._strip_protocol(path1)
        dst = self._strip_protocol(path2)
        if self.isdir(src):
            self.makedirs(dst, exist_ok=True)
        else:
            self._making_parents(dst, lambda: self.client.copy(src, dst))

    def created(self, path):
        return datetime.datetime.fromtimestamp(self.info(path)["ctime"], tz=datetime.timezone.utc)

    def modified(self, path):
        return datetime.datetime.fromtimestamp(self.info(path)["mtime"], tz=datetime.timezone.utc)

    def chmod(self, path, mode):
        self.client.chmod(self._strip_protocol(path), mode)

    def touch(self, path, truncate=True, **kwargs):
        path = self._strip_protocol(path)
        if truncate or not self.exists(path):
            self.pipe_file(path, b"")
        else:
            self.client.utime(path)

    def symlink(self, target, path):
        self.client.symlink(target, self._strip_protocol(path))

    def readlink(self, path):
        return self.client.readlink(self._strip_protocol(path))

    # --- data -------------------------------------------------------------

    def _making_parents(self, path, op):
        """op(), and again after making `path`'s missing parents (auto_mkdir)."""
        try:
            return op()
        except FileNotFoundError:
            parent = self._parent(path)
            if not self.auto_mkdir or self.exists(parent):
                raise
            self.makedirs(parent, exist_ok=True)
            return op()

    def cat_file(self, path, start=None, end=None, **kwargs):
        path = self._strip_protocol(path)
        fh, st = self.client.open(path, os.O_RDONLY)
        try:
            if stat.S_ISDIR(st[1]):
                raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
            size = st[4]
            start = 0 if start is None else (max(size + start, 0) if start < 0 else start)
            end = size if end is None else (max(size + end, 0) if end < 0 else min(end, size))
            if end <= start:
                return b""
            return self.client.pread(fh, start, end - start)
        finally:
            self.client.release(fh)

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        path = self._strip_protocol(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        if mode == "create":
            flags |= os.O_EXCL
        fh, _ = self._making_parents(path, lambda: self.client.open(path, flags))
        try:
            _write_all(self.client, fh, 0, bytes(value))
        finally:
            self.client.release(fh)

    def put_file(self, lpath, rpath, callback=None, mode="overwrite", **kwargs):
        rpath = self._strip_protocol(rpath)
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        if mode == "create":
            flags |= os.O_EXCL
        with open(lpath, "rb") as local:
            size = os.fstat(local.fileno()).st_size
            if callback is not None:
                callback.set_size(size)
            fh, _ = self._making_parents(rpath, lambda: self.client.open(rpath, flags))
            try:
                offset = 0
                while True:
                    data = local.read(CHUNK)
                    if not data:
                        break
                    _write_all(self.client, fh, offset, data)
                    offset += len(data)
                    if callback is not None:
                        callback.relative_update(len(data))
            finally:
                self.client.release(fh)

    def get_file(self, rpath, lpath, callback=None, outfile=None, **kwargs):
        rpath = self._strip_protocol(rpath)
        if self.isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        if outfile is None and os.path.dirname(lpath):
            os.makedirs(os.path.dirname(lpath), exist_ok=True)
        fh, st = self.client.open(rpath, os.O_RDONLY)
        try:
            if callback is not None:
                callback.set_size(st[4])
            local = outfile if outfile is not None else open(lpath, "wb")
            try:
                offset = 0
                while True:
                    data = self.client.pread(fh, offset, CHUNK)
                    if not data:
                        break
                    local.write(data)
                    offset += len(data)
                    if callback is not None:
                        callback.relative_update(len(data))
            finally:
                if outfile is None:
                    local.close()
        finally:
            self.client.release(fh)

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        return JfsFile(self, self._strip_protocol(path), mode, block_size, autocommit,
                       cache_options=cache_options, **kwargs)

    def statfs(self):
        total, avail, inodes, avail_inodes = self.client.statfs()
        return {"total": total, "available": avail, "inodes": inodes, "available_inodes": avail_inodes}


class JfsFile(AbstractBufferedFile):
    """An open file of a jfs volume: one handle of the client, opened at
    once (close-to-open: it reads what was committed before it opened);
    writes are buffered, stored as they fill a block, and committed at close."""

    DEFAULT_BLOCK_SIZE = CHUNK

    def __init__(self, fs, path, mode="rb", block_size=None, autocommit=True,
                 cache_type="readahead", cache_options=None, **kwargs):
        if mode not in {"rb", "wb", "ab", "xb"}:
            raise NotImplementedError(f"jfs: file mode {mode!r} (use rb, wb, ab or xb)")
        flags = {
            "rb": os.O_RDONLY,
            "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
            "ab": os.O_WRONLY | os.O_CREAT,
            "xb": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
        }[mode]
        if mode == "rb":
            self.fh, st = fs.client.open(path, flags)
        else:
            self.fh, st = fs._making_parents(path, lambda: fs.client.open(path, flags))
        self.inode = st[0]
        if stat.S_ISDIR(st[1]):
            fs.client.release(self.fh)
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        self._base = st[4] if mode == "ab" else 0
        kwargs.pop("size", None)
        super().__init__(fs, path, mode, block_size or self.DEFAULT_BLOCK_SIZE, autocommit,
                         cache_type=cache_type, cache_options=cache_options,
                         size=st[4] if mode == "rb" else None, **kwargs)
        if mode == "rb":
            self._details = _info(path, st)
        else:
            self.offset = 0

    def _fetch_range(self, start, end):
        return self.fs.client.pread(self.fh, start, end - start)

    def _initiate_upload(self):
        pass

    def _upload_chunk(self, final=False):
        data = self.buffer.getvalue() if self.mode != "rb" else b""
        if data:
            _write_all(self.fs.client, self.fh, self._base + self.offset, data)
        return True

    def fsync(self):
        """Writes what is buffered, commits it and makes it durable."""
        data = self.buffer.getvalue() if self.mode != "rb" else b""
        if data:
            _write_all(self.fs.client, self.fh, self._base + self.offset, data)
            self.offset += len(data)
            self.buffer = io.BytesIO()
        self.fs.client.fsync(self.fh)

    def lock(self, kind="w", wait=True):
        """A whole-file lock: "r" shared (a file open to read), "w" exclusive
        (a file open to write), "u" to drop it; closing the file drops it.
        FUSE mounts of the volume see it as an fcntl lock."""
        self.fs.client.lock(self.fh, kind, wait)

    def close(self):
        if self.closed:
            return
        try:
            super().close()
        finally:
            self.fs.client.release(self.fh)
