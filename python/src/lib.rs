//! `jfs._jfs`: the Python binding of `jfs_client::direct`, a volume used
//! without FUSE. Each `Client` attaches once per process: its own runtime,
//! connection pool and session. A process forked after it attached (a
//! DataLoader worker) attaches again at its first call and never touches
//! the parent's connections, which it leaves open and unused; no fork
//! happens while a thread is inside OpenSSL (see `meta::tls_fork`). Calls drop
//! the GIL while they wait, so Python threads run them in parallel.
mod fork;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jfs_client::direct::{Direct, DirectOptions, DirectResult, OpenFlags};
use jfs_client::meta::{Attr, NodeType, SetAttr, TimeSet};
use pyo3::exceptions::{PyOSError, PyPermissionError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A stat as Python gets it: (inode, st_mode with the type bits, uid, gid,
/// size, atime_ns, mtime_ns, ctime_ns, nlink).
type StatTuple = (u64, u32, u32, u32, u64, i64, i64, i64, u32);

/// One attachment: what a process (not its forks) uses.
struct Attached {
    runtime: tokio::runtime::Runtime,
    direct: Direct,
    pid: u32,
    /// Stamped on the handles Python gets (see [`Attached::handle`]).
    token: u64,
}

/// Bits of a Python-visible handle that hold the attachment's token: a
/// handle of an earlier attachment (the parent's, before a fork; one closed
/// since) is refused with EBADF, never taken for another file's.
const TOKEN_SHIFT: u32 = 40;

impl Attached {
    /// The handle Python gets for `fh`.
    fn handle(&self, fh: u64) -> u64 {
        (self.token << TOKEN_SHIFT) | fh
    }

    /// The `Direct` handle of Python's `handle`, if it is this attachment's.
    fn fh(&self, handle: u64) -> DirectResult<u64> {
        match handle >> TOKEN_SHIFT == self.token {
            true => Ok(handle & ((1 << TOKEN_SHIFT) - 1)),
            false => Err(libc::EBADF),
        }
    }
}

/// A volume attached to by this process (see the module's doc).
#[pyclass(frozen, module = "jfs._jfs")]
struct Client {
    meta_url: String,
    options: DirectOptions,
    /// Whether uid, gid or groups were given (else each attachment takes
    /// the process's own, which a fork may have changed).
    ids_given: bool,
    attached: Mutex<Option<Arc<Attached>>>,
}

impl Drop for Client {
    fn drop(&mut self) {
        // a fork's copy of the parent's attachment is never dropped here:
        // its runtime would wait for threads that do not exist in the fork
        let slot = self.attached.get_mut().map(Option::take);
        if let Ok(Some(a)) = slot {
            if a.pid != std::process::id() {
                std::mem::forget(a);
            }
        }
    }
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (meta_url, *, read_only=false, subdir=None, cache_dir=None,
        cache_size_mib=10240, buffer_size_mib=300, max_connections=16, changes_poll=0.05,
        commit_after=5.0, umask=None, uid=None, gid=None, groups=None, describe=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        meta_url: String,
        read_only: bool,
        subdir: Option<String>,
        cache_dir: Option<PathBuf>,
        cache_size_mib: u64,
        buffer_size_mib: usize,
        max_connections: usize,
        changes_poll: f64,
        commit_after: f64,
        umask: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        groups: Option<Vec<u32>>,
        describe: Option<String>,
    ) -> PyResult<Client> {
        let seconds = |name: &str, s: f64| {
            (s.is_finite() && s >= 0.0)
                .then(|| Duration::from_secs_f64(s))
                .ok_or_else(|| PyValueError::new_err(format!("{name}: give seconds, 0 or more")))
        };
        let defaults = DirectOptions::default();
        let ids_given = (uid, gid);
        let (uid, gid) = (uid.unwrap_or(defaults.uid), gid.unwrap_or(defaults.gid));
        // acting as another user is root's (as a FUSE mount's requests carry
        // the caller's own ids): a user gets no one else's access this way
        if defaults.uid != 0 && (uid, gid) != (defaults.uid, defaults.gid) {
            return Err(PyPermissionError::new_err(format!(
                "jfs: only root may act as another user (this process is uid {}, gid {}; \
                 asked for uid {uid}, gid {gid})",
                defaults.uid, defaults.gid
            )));
        }
        if defaults.uid != 0 && groups.is_some() {
            return Err(PyPermissionError::new_err(
                "jfs: only root may give the groups requests act with (a process acts with \
                 its own supplementary groups)",
            ));
        }
        let ids_given = ids_given.0.is_some() || ids_given.1.is_some() || groups.is_some();
        let options = DirectOptions {
            read_only,
            subdir,
            cache_dir,
            cache_mib: cache_size_mib,
            buffer_mib: buffer_size_mib,
            max_connections: max_connections.max(1),
            changes_poll: seconds("changes_poll", changes_poll)?,
            commit_after: seconds("commit_after", commit_after)?,
            umask: umask.unwrap_or_else(process_umask),
            uid,
            gid,
            groups,
            describe: describe.unwrap_or_else(|| "python".to_string()),
            ..defaults
        };
        let client = Client {
            meta_url,
            options,
            ids_given,
            attached: Mutex::new(None),
        };
        // attach now: a bad URL or key fails here, not at the first read
        client.attached(py)?;
        Ok(client)
    }

    /// The session this process's attachment registered.
    fn session(&self, py: Python<'_>) -> PyResult<i64> {
        Ok(self.attached(py)?.direct.session())
    }

    /// Commits what is pending and ends this process's session.
    fn close(&self, py: Python<'_>) {
        let taken = self.slot(py).take();
        if let Some(a) = taken {
            if a.pid == std::process::id() {
                py.detach(|| a.runtime.block_on(a.direct.close()));
            } else {
                std::mem::forget(a);
            }
        }
    }

    #[pyo3(signature = (path, follow=true))]
    fn stat(&self, py: Python<'_>, path: PathArg, follow: bool) -> PyResult<StatTuple> {
        let attr = self.run(py, &path, async |d| d.stat(path.as_bytes(), follow).await)?;
        Ok(stat_tuple(&attr))
    }

    /// The entries of a directory: (name, stat) pairs.
    /// (names as `os.listdir` gives them: any bytes, by `os.fsdecode`)
    fn listdir<'py>(
        &self,
        py: Python<'py>,
        path: PathArg,
    ) -> PyResult<Vec<(Bound<'py, PyAny>, StatTuple)>> {
        let entries = self.run(py, &path, async |d| d.list(path.as_bytes()).await)?;
        entries
            .into_iter()
            .map(|(name, attr)| Ok((fs_decoded(py, &name)?, stat_tuple(&attr))))
            .collect()
    }

    #[pyo3(signature = (path, mode=0o777))]
    fn mkdir(&self, py: Python<'_>, path: PathArg, mode: u32) -> PyResult<()> {
        self.run(py, &path, async |d| d.mkdir(path.as_bytes(), mode).await)
            .map(drop)
    }

    fn unlink(&self, py: Python<'_>, path: PathArg) -> PyResult<()> {
        self.run(py, &path, async |d| d.unlink(path.as_bytes()).await)
    }

    fn rmdir(&self, py: Python<'_>, path: PathArg) -> PyResult<()> {
        self.run(py, &path, async |d| d.rmdir(path.as_bytes()).await)
    }

    fn rename(&self, py: Python<'_>, src: PathArg, dst: PathArg) -> PyResult<()> {
        self.run(py, &src, async |d| {
            d.rename(src.as_bytes(), dst.as_bytes()).await
        })
    }

    fn symlink(&self, py: Python<'_>, target: PathArg, path: PathArg) -> PyResult<()> {
        self.run(py, &path, async |d| {
            d.symlink(target.as_bytes(), path.as_bytes()).await
        })
        .map(drop)
    }

    fn readlink<'py>(&self, py: Python<'py>, path: PathArg) -> PyResult<Bound<'py, PyAny>> {
        let target = self.run(py, &path, async |d| d.readlink(path.as_bytes()).await)?;
        fs_decoded(py, &target)
    }

    fn chmod(&self, py: Python<'_>, path: PathArg, mode: u32) -> PyResult<()> {
        let change = SetAttr {
            mode: Some(mode & 0o7777),
            ..SetAttr::default()
        };
        self.set_attr(py, &path, change)
    }

    fn chown(&self, py: Python<'_>, path: PathArg, uid: i64, gid: i64) -> PyResult<()> {
        let (uid, gid) = (chown_id(uid)?, chown_id(gid)?);
        self.run(py, &path, async |d| d.chown(&path, uid, gid).await)
            .map(drop)
    }

    fn truncate(&self, py: Python<'_>, path: PathArg, length: i64) -> PyResult<()> {
        let length = not_negative(length, &path)?;
        self.set_attr(py, &path, SetAttr::length(length))
    }

    /// Sets the access and modification times (ns; None: now).
    #[pyo3(signature = (path, atime_ns=None, mtime_ns=None))]
    fn utime(
        &self,
        py: Python<'_>,
        path: PathArg,
        atime_ns: Option<i64>,
        mtime_ns: Option<i64>,
    ) -> PyResult<()> {
        let at = |ns: Option<i64>| Some(ns.map_or(TimeSet::Now, TimeSet::At));
        let change = SetAttr {
            atime: at(atime_ns),
            mtime: at(mtime_ns),
            ..SetAttr::default()
        };
        self.set_attr(py, &path, change)
    }

    /// Opens a file with `os.open` flags: (handle, stat).
    #[pyo3(signature = (path, flags, mode=0o666))]
    fn open(
        &self,
        py: Python<'_>,
        path: PathArg,
        flags: i32,
        mode: u32,
    ) -> PyResult<(u64, StatTuple)> {
        let f = OpenFlags::of(flags);
        let attached = self.attached(py)?;
        let opened = py.detach(|| {
            attached
                .runtime
                .block_on(attached.direct.open(path.as_bytes(), f, mode))
        });
        let (fh, attr) = opened.map_err(|e| os_error(e, &path))?;
        Ok((attached.handle(fh), stat_tuple(&attr)))
    }

    /// Up to `size` bytes from `offset` (fewer at the end of the file).
    fn pread<'py>(
        &self,
        py: Python<'py>,
        fh: u64,
        offset: i64,
        size: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let offset = not_negative(offset, b"")?;
        let data = self.run_handle(py, fh, async |d, fh| d.read(fh, offset, size).await)?;
        Ok(PyBytes::new(py, &data))
    }

    /// Writes `data` at `offset`: the count written, as `os.pwrite` answers
    /// (short only where the largest file ends).
    fn pwrite(&self, py: Python<'_>, fh: u64, offset: i64, data: &[u8]) -> PyResult<usize> {
        let offset = not_negative(offset, b"")?;
        self.run_handle(py, fh, async |d, fh| d.write(fh, offset, data).await)
    }

    /// Commits the handle's writes: other clients see them from now on.
    fn flush(&self, py: Python<'_>, fh: u64) -> PyResult<()> {
        self.run_handle(py, fh, async |d, fh| d.flush(fh).await)
    }

    /// Commits the handle's writes and makes them durable.
    fn fsync(&self, py: Python<'_>, fh: u64) -> PyResult<()> {
        self.run_handle(py, fh, async |d, fh| d.fsync(fh).await)
    }

    /// Closes a handle (its writes committed first).
    fn release(&self, py: Python<'_>, fh: u64) -> PyResult<()> {
        self.run_handle(py, fh, async |d, fh| d.close_handle(fh).await)
    }

    /// The stat of an open file, as this client sees it (its pending writes included).
    fn fstat(&self, py: Python<'_>, fh: u64) -> PyResult<StatTuple> {
        let attr = self.run_handle(py, fh, async |d, fh| d.handle_attr(fh).await)?;
        Ok(stat_tuple(&attr))
    }

    /// A whole-file lock ("r", "w", or "u" to drop it) of handle `fh`'s
    /// file, owned by the handle (closing it drops it); mounts see it as an
    /// fcntl lock.
    #[pyo3(signature = (fh, kind, wait=true))]
    fn lock(&self, py: Python<'_>, fh: u64, kind: &str, wait: bool) -> PyResult<()> {
        let typ = match kind {
            "r" => libc::F_RDLCK,
            "w" => libc::F_WRLCK,
            "u" => libc::F_UNLCK,
            _ => return Err(PyValueError::new_err("lock kind: \"r\", \"w\" or \"u\"")),
        };
        self.run_handle(py, fh, async |d, fh| d.lock(fh, typ, wait).await)
    }

    /// Copies file `src` to `dst` as metadata (shared slices, no bytes moved).
    fn copy(&self, py: Python<'_>, src: PathArg, dst: PathArg) -> PyResult<()> {
        self.run(py, &src, async |d| {
            d.copy(src.as_bytes(), dst.as_bytes()).await
        })
    }

    /// (total bytes, available bytes, used inodes, available inodes).
    fn statfs(&self, py: Python<'_>) -> PyResult<(u64, u64, u64, u64)> {
        let s = self.run(py, b"", async |d| d.statfs().await)?;
        Ok((s.total_space, s.avail_space, s.used_inodes, s.avail_inodes))
    }
}

impl Client {
    /// This process's attachment, made now if there is none (or the one
    /// there is was the parent's: this process is a fork).
    fn attached(&self, py: Python<'_>) -> PyResult<Arc<Attached>> {
        let pid = std::process::id();
        if let Some(a) = self.current(py, pid) {
            return Ok(a);
        }
        let mut options = self.options.clone();
        if !self.ids_given {
            // a fork may have changed its user and groups since (setuid)
            let own = DirectOptions::default();
            (options.uid, options.gid, options.groups) = (own.uid, own.gid, None);
        }
        // (without the GIL and without the slot's lock: a fork meanwhile
        // attaches for itself)
        let made = py
            .detach(|| attach(&self.meta_url, &options))
            .map_err(|e| PyRuntimeError::new_err(format!("jfs: attaching to the volume: {e:#}")))?;
        let made = Arc::new(made);
        // another thread may have attached meanwhile: the first one stays
        let kept = {
            let mut slot = self.slot(py);
            match slot.as_ref() {
                Some(a) if a.pid == pid => a.clone(),
                _ => slot.insert(made.clone()).clone(),
            }
        };
        if !Arc::ptr_eq(&kept, &made) {
            py.detach(|| made.runtime.block_on(made.direct.close()));
        }
        Ok(kept)
    }

    /// The attachment's slot, locked only while the GIL is held (`py`) and
    /// released before it is: a thread that forks holds the GIL, so no fork
    /// copies the lock held by another thread (a worker forked while a
    /// thread attached used to hang on its first call), and no thread ever
    /// waits for it.
    fn slot<'a>(&'a self, _py: Python<'_>) -> std::sync::MutexGuard<'a, Option<Arc<Attached>>> {
        self.attached.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This process's attachment, if it has one; a parent's (this process
    /// is a fork) is left alone: its runtime threads do not exist here, and
    /// its connections are the parent's, neither touched nor dropped.
    fn current(&self, py: Python<'_>, pid: u32) -> Option<Arc<Attached>> {
        let mut slot = self.slot(py);
        match slot.as_ref().map(|a| a.pid) {
            Some(p) if p == pid => slot.clone(),
            Some(_) => {
                std::mem::forget(slot.take());
                None
            }
            None => None,
        }
    }

    /// Runs `op` on this process's attachment without the GIL; an errno
    /// becomes an OSError (FileNotFoundError and so on) naming `path`.
    fn run<T, F>(&self, py: Python<'_>, path: &[u8], op: F) -> PyResult<T>
    where
        F: AsyncFnOnce(&Direct) -> DirectResult<T> + Send,
        T: Send,
    {
        let attached = self.attached(py)?;
        let result = py.detach(|| attached.runtime.block_on(op(&attached.direct)));
        result.map_err(|errno| os_error(errno, path))
    }

    /// Runs `op` with the `Direct` handle of Python's `handle` (EBADF if it
    /// is not this attachment's).
    fn run_handle<T, F>(&self, py: Python<'_>, handle: u64, op: F) -> PyResult<T>
    where
        F: AsyncFnOnce(&Direct, u64) -> DirectResult<T> + Send,
        T: Send,
    {
        let attached = self.attached(py)?;
        let fh = attached.fh(handle).map_err(|e| os_error(e, b""))?;
        let result = py.detach(|| attached.runtime.block_on(op(&attached.direct, fh)));
        result.map_err(|errno| os_error(errno, b""))
    }

    fn set_attr(&self, py: Python<'_>, path: &[u8], change: SetAttr) -> PyResult<()> {
        self.run(py, path, async |d| d.set_attr(path, &change).await)
            .map(drop)
    }
}

/// Attaches in a runtime of the attachment's own.
fn attach(meta_url: &str, options: &DirectOptions) -> anyhow::Result<Attached> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("jfs")
        .build()?;
    let direct = runtime.block_on(Direct::attach(meta_url, options))?;
    Ok(Attached {
        runtime,
        direct,
        pid: std::process::id(),
        token: rand_token(),
    })
}

/// A token no earlier attachment of this process had, most likely (24 bits:
/// the pid, the time and a counter mixed).
fn rand_token() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mixed = nanos
        ^ (u64::from(std::process::id()) << 20)
        ^ COUNT
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9);
    (mixed % ((1 << 23) - 1)) + 1
}

/// A path as the os module takes one: a str (its bytes as `os.fsencode`
/// gives them, so any name `listdir` answered names the same file), bytes,
/// or a path-like object.
struct PathArg(Vec<u8>);

impl PathArg {
    fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::Deref for PathArg {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for PathArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<PathArg> {
        if let Ok(bytes) = obj.cast::<PyBytes>() {
            return Ok(PathArg(bytes.as_bytes().to_vec()));
        }
        // (os.fsencode, looked up once)
        static FSENCODE: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
        let fsencode = FSENCODE.import(obj.py(), "os", "fsencode")?;
        let bytes = fsencode.call1((obj,))?;
        Ok(PathArg(bytes.cast::<PyBytes>()?.as_bytes().to_vec()))
    }
}

/// An id of os.chown: -1 (or its 32-bit form) leaves it as it is; one
/// past 32 bits is an OverflowError, as os.chown raises it.
fn chown_id(id: i64) -> PyResult<Option<u32>> {
    match id {
        -1 => Ok(None),
        id => match u32::try_from(id) {
            Ok(u32::MAX) => Ok(None),
            Ok(id) => Ok(Some(id)),
            Err(_) => Err(pyo3::exceptions::PyOverflowError::new_err(format!(
                "id {id} is not a 32-bit user or group id"
            ))),
        },
    }
}

/// A name or target as the os module gives it back: `os.fsdecode` of its bytes.
fn fs_decoded<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    py.import("os")?
        .call_method1("fsdecode", (PyBytes::new(py, bytes),))
}

/// An offset or length that may not be negative (EINVAL, as os.pwrite,
/// os.pread and os.truncate answer).
fn not_negative(n: i64, path: &[u8]) -> PyResult<u64> {
    u64::try_from(n).map_err(|_| os_error(libc::EINVAL, path))
}

/// An OSError of `errno` (Python picks its subclass), naming `path` if any.
fn os_error(errno: i32, path: &[u8]) -> PyErr {
    let message = std::io::Error::from_raw_os_error(errno).to_string();
    let message = message
        .split(" (os error")
        .next()
        .unwrap_or(&message)
        .to_string();
    match path.is_empty() {
        true => PyOSError::new_err((errno, message)),
        false => PyOSError::new_err((errno, message, String::from_utf8_lossy(path).into_owned())),
    }
}

fn stat_tuple(a: &Attr) -> StatTuple {
    let kind = match a.kind {
        NodeType::File => libc::S_IFREG,
        NodeType::Dir => libc::S_IFDIR,
        NodeType::Symlink => libc::S_IFLNK,
        NodeType::Fifo => libc::S_IFIFO,
        NodeType::BlockDev => libc::S_IFBLK,
        NodeType::CharDev => libc::S_IFCHR,
        NodeType::Socket => libc::S_IFSOCK,
    };
    (
        a.inode,
        kind | (a.mode & 0o7777),
        a.uid,
        a.gid,
        a.length,
        a.atime,
        a.mtime,
        a.ctime,
        a.nlink,
    )
}

/// The process's umask (read without changing it for good: set and restored).
fn process_umask() -> u32 {
    let mask = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    nix::sys::stat::umask(mask);
    mask.bits()
}

#[pymodule]
fn _jfs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("JFS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    m.add_class::<Client>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    fork::register_hooks(m)?;
    Ok(())
}
