//! The `file` backend: objects as files under a local directory.
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use super::{is_archive_class, ObjectInfo, ObjectState, ObjectStore};

/// What marks an object file being written (`KEY.tmp.PID.N`, renamed to
/// KEY when complete; a new block is written without a name instead, see
/// `write_new_block`). A killed mount leaves such files behind; `jfs gc`
/// removes them once they are old.
const TEMPORARY_MARK: &str = ".tmp.";

/// The object key a leftover temporary file of the file store was written
/// for, if `key` is one.
pub fn temporary_of(key: &str) -> Option<&str> {
    let (object, rest) = key.rsplit_once(TEMPORARY_MARK)?;
    let (pid, n) = rest.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(n)).then_some(object)
}

pub struct FileStore {
    root: PathBuf,
    tmp_counter: AtomicU64,
}

impl FileStore {
    /// A store rooted at `dir`, created if missing.
    pub fn new(dir: &str) -> anyhow::Result<FileStore> {
        let root = PathBuf::from(dir);
        if !root.is_absolute() {
            anyhow::bail!("--bucket for file storage must be an absolute directory, not {dir:?}");
        }
        std::fs::create_dir_all(&root)
            .map_err(|e| anyhow::anyhow!("cannot create the block directory {dir}: {e}"))?;
        Ok(FileStore {
            root,
            tmp_counter: AtomicU64::new(0),
        })
    }

    fn path(&self, key: &str) -> io::Result<PathBuf> {
        if key.is_empty() || key.starts_with('/') || key.split('/').any(|p| p == "..") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad object key {key:?}"),
            ));
        }
        Ok(self.root.join(key))
    }
}

/// The file beside an object that keeps its storage class ("object metadata").
const CLASS_SUFFIX: &str = ".class";

fn class_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(CLASS_SUFFIX);
    PathBuf::from(p)
}

/// Whether `data` may go with direct I/O: a whole number of 4 KiB units
/// in a buffer aligned to them (the writer's blocks).
fn direct_io_fits(data: &[u8]) -> bool {
    const ALIGN: usize = 4096;
    !data.is_empty()
        && (data.as_ptr() as usize).is_multiple_of(ALIGN)
        && data.len().is_multiple_of(ALIGN)
}

/// Writes an object's file and makes its bytes durable (fdatasync) before
/// it returns. A whole block in an aligned buffer (the writer's) goes with
/// direct I/O: the kernel takes it from our memory, no copy into the page
/// cache; elsewhere (unaligned tails, file systems without O_DIRECT such as
/// tmpfs) a plain write.
fn write_object(path: &Path, data: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let open = |direct: bool| {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(if direct { libc::O_DIRECT } else { 0 })
            .open(path)
    };
    if direct_io_fits(data) {
        let direct = open(true).and_then(|mut f| {
            f.write_all(data)?;
            f.sync_data()
        });
        match direct {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            done => return done,
        }
    }
    let mut f = open(false)?;
    f.write_all(data)?;
    f.sync_data()
}

/// Writes a new block as a file without a name in `dir` (O_TMPFILE), then
/// names it `path` and makes it durable (true). False when the file cannot
/// be made or named (a file system without O_TMPFILE or that will not link
/// such a file, no /proc, `path` exists): nothing was made, the caller
/// writes it beside `path` and renames it instead, and that says what is
/// wrong if anything is. A write that fails leaves nothing behind, and a
/// stale attempt of the same put can never touch a file another attempt
/// named: the file has a name only once it is whole. One file system
/// commit (the fsync after the link) makes the bytes, the file and its
/// name durable, where the rename of a written file needed a second.
fn write_new_block(dir: &Path, path: &Path, data: &[u8]) -> io::Result<bool> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let open = |direct: bool| {
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE | if direct { libc::O_DIRECT } else { 0 })
            .open(dir)
    };
    let direct = direct_io_fits(data);
    let mut file = match open(direct).or_else(|_| open(false)) {
        Ok(file) => file,
        Err(_) => return Ok(false),
    };
    if let Err(e) = file.write_all(data) {
        // (direct I/O refused for this buffer: once more through the cache)
        if !(direct && e.raw_os_error() == Some(libc::EINVAL)) {
            return Err(e);
        }
        file = open(false)?;
        file.write_all(data)?;
    }
    let linked = nix::unistd::linkat(
        nix::fcntl::AT_FDCWD,
        Path::new(&format!("/proc/self/fd/{}", file.as_raw_fd())),
        nix::fcntl::AT_FDCWD,
        path,
        nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
    );
    if linked.is_err() {
        return Ok(false);
    }
    // (fsync, not fdatasync: the link count changed after the bytes)
    file.sync_all()?;
    Ok(true)
}

/// Makes the entries of directory `dir` durable (a file renamed into it).
fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Creates `dir` and its missing parents below `root`, each made durable
/// in its own parent.
fn create_dirs(root: &Path, dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| *p != root && p.starts_with(root)) {
        create_dirs(root, parent)?;
    }
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        other => other?,
    }
    sync_dir(dir.parent().unwrap_or(root))
}

/// Records an object's class (and, for an archive class, whether it was
/// restored); the default class needs no file.
fn write_class(meta: &Path, class: &str, restored: bool) -> io::Result<()> {
    if class.is_empty() || class == "STANDARD" {
        return match std::fs::remove_file(meta) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    if let Some(parent) = meta.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(
        meta,
        format!("{class}\n{}", if restored { "restored\n" } else { "" }),
    )
}

fn read_class(meta: &Path) -> ObjectState {
    let text = std::fs::read_to_string(meta).unwrap_or_default();
    let mut lines = text.lines();
    let class = lines.next().unwrap_or("").to_string();
    let restored = lines.next() == Some("restored");
    ObjectState {
        archived: is_archive_class(&class) && !restored,
        restoring: false,
        class,
    }
}

impl FileStore {
    /// Stores `data` under `key`: a `new_block` is written where it ends
    /// up ([`write_new_block`]), anything else beside it and renamed.
    async fn put_file(
        &self,
        key: &str,
        data: Bytes,
        class: &str,
        new_block: bool,
    ) -> io::Result<()> {
        let path = self.path(key)?;
        let meta = class_path(&path);
        let class = class.to_string();
        let tmp = path.with_extension(format!(
            "{}{}.{}",
            &TEMPORARY_MARK[1..],
            std::process::id(),
            self.tmp_counter.fetch_add(1, Ordering::Relaxed)
        ));
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || {
            let parent = path.parent().unwrap_or(&root).to_path_buf();
            create_dirs(&root, &parent)?;
            // the class first, then the object (write then rename: a reader
            // never sees half an object); durable when this returns, as a
            // slice is committed only after its blocks are stored (fsync of
            // a file promises its bytes survive an OS crash)
            write_class(&meta, &class, false)?;
            // a new block, named once whole (its key is used once: nothing
            // else writes or reads it before its slice is committed)
            if new_block && write_new_block(&parent, &path, &data)? {
                return sync_dir(&parent);
            }
            write_object(&tmp, &data)
                .and_then(|()| std::fs::rename(&tmp, &path))
                .inspect_err(|_| {
                    let _ = std::fs::remove_file(&tmp);
                })?;
            sync_dir(&parent)
        })
        .await
        .map_err(io::Error::other)?
    }
}

#[async_trait]
impl ObjectStore for FileStore {
    async fn put(&self, key: &str, data: Bytes, class: &str) -> io::Result<()> {
        self.put_file(key, data, class, false).await
    }

    async fn put_block(&self, key: &str, data: Bytes, class: &str) -> io::Result<()> {
        self.put_file(key, data, class, true).await
    }

    async fn get(&self, key: &str, off: u64, len: usize) -> io::Result<Bytes> {
        let path = self.path(key)?;
        let key = key.to_string();
        tokio::task::spawn_blocking(move || {
            let state = read_class(&class_path(&path));
            if state.archived {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "InvalidObjectState: {key} is archived in {} and not restored",
                        state.class
                    ),
                ));
            }
            super::read_range(&path, off, len)
        })
        .await
        .map_err(io::Error::other)?
    }

    async fn delete(&self, key: &str) -> io::Result<()> {
        let path = self.path(key)?;
        let _ = tokio::fs::remove_file(class_path(&path)).await;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn set_class(&self, key: &str, class: &str) -> io::Result<()> {
        let path = self.path(key)?;
        if !tokio::fs::try_exists(&path).await? {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no object {key}"),
            ));
        }
        let class = class.to_string();
        tokio::task::spawn_blocking(move || write_class(&class_path(&path), &class, false))
            .await
            .map_err(io::Error::other)?
    }

    async fn head(&self, key: &str) -> io::Result<ObjectState> {
        let path = self.path(key)?;
        if !tokio::fs::try_exists(&path).await? {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no object {key}"),
            ));
        }
        Ok(read_class(&class_path(&path)))
    }

    async fn restore(&self, key: &str) -> io::Result<bool> {
        let path = self.path(key)?;
        let state = self.head(key).await?;
        if !state.archived {
            return Ok(true);
        }
        // a local directory restores at once
        write_class(&class_path(&path), &state.class, true)?;
        Ok(false)
    }

    async fn list(&self, prefix: &str) -> io::Result<Vec<ObjectInfo>> {
        let root = self.root.clone();
        let prefix = prefix.to_string();
        tokio::task::spawn_blocking(move || {
            // walk from the deepest directory the prefix names
            let start = match prefix.rfind('/') {
                Some(i) => root.join(&prefix[..i]),
                None => root.clone(),
            };
            let mut out = Vec::new();
            let mut dirs = vec![start];
            while let Some(dir) = dirs.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                for entry in entries {
                    let entry = entry?;
                    let meta = entry.metadata()?;
                    if meta.is_dir() {
                        dirs.push(entry.path());
                        continue;
                    }
                    let Ok(rel) = entry.path().strip_prefix(&root).map(|p| p.to_path_buf()) else {
                        continue;
                    };
                    let key = rel.to_string_lossy().to_string();
                    if key.starts_with(&prefix) && !key.ends_with(CLASS_SUFFIX) {
                        out.push(ObjectInfo {
                            key,
                            size: meta.len(),
                            modified: meta.modified()?,
                        });
                    }
                }
            }
            Ok(out)
        })
        .await
        .map_err(io::Error::other)?
    }

    fn describe(&self) -> String {
        format!("file://{}", self.root.display())
    }

    fn disk_space(&self) -> Option<(u64, u64)> {
        let st = nix::sys::statvfs::statvfs(&self.root).ok()?;
        let unit = st.fragment_size() as u64;
        Some((
            st.blocks_available() as u64 * unit,
            st.blocks() as u64 * unit,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_files_name_their_object() {
        assert_eq!(
            temporary_of("v/chunks/0/0/1_0_5.tmp.123.4"),
            Some("v/chunks/0/0/1_0_5")
        );
        assert_eq!(temporary_of("v/chunks/0/0/1_0_5"), None);
        assert_eq!(temporary_of("v/chunks/0/0/1_0_5.tmp.x.4"), None);
    }

    #[tokio::test]
    async fn put_get_ranges_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().to_str().unwrap()).unwrap();
        store
            .put("v/chunks/0/0/1_0_5", Bytes::from_static(b"hello"), "")
            .await
            .unwrap();
        assert_eq!(
            &store.get("v/chunks/0/0/1_0_5", 1, 3).await.unwrap()[..],
            b"ell"
        );
        assert_eq!(
            &store.get("v/chunks/0/0/1_0_5", 3, 10).await.unwrap()[..],
            b"lo"
        );
        store.delete("v/chunks/0/0/1_0_5").await.unwrap();
        store.delete("v/chunks/0/0/1_0_5").await.unwrap();
        assert!(store.get("v/chunks/0/0/1_0_5", 0, 1).await.is_err());
    }

    #[tokio::test]
    async fn a_new_block_is_named_once_whole_and_an_existing_object_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().to_str().unwrap()).unwrap();
        let key = "v/chunks/0/0/7_0_8192";
        // an aligned whole block (direct I/O where the file system has it)
        let aligned = |fill: u8| {
            let mut buf = bytes::BytesMut::with_capacity(8192 + 4096);
            let pad = (4096 - buf.as_ptr() as usize % 4096) % 4096;
            buf.resize(pad + 8192, fill);
            buf.freeze().slice(pad..)
        };
        let files = |sub: &str| {
            let mut names: Vec<String> = std::fs::read_dir(dir.path().join(sub))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect();
            names.sort();
            names
        };
        store.put_block(key, aligned(1), "").await.unwrap();
        assert_eq!(
            &store.get(key, 0, 8192).await.unwrap()[..],
            &[1u8; 8192][..]
        );
        // the same key again (a put tried again): replaced whole
        store.put_block(key, aligned(2), "").await.unwrap();
        assert_eq!(
            &store.get(key, 0, 8192).await.unwrap()[..],
            &[2u8; 8192][..]
        );
        // a new block's tail (unaligned)
        store
            .put_block("v/chunks/0/0/8_0_3", Bytes::from_static(b"abc"), "")
            .await
            .unwrap();
        assert_eq!(
            &store.get("v/chunks/0/0/8_0_3", 0, 3).await.unwrap()[..],
            b"abc"
        );
        // an object that is no block (the volume's marker), made and replaced
        store
            .put("v/juicefs_uuid", Bytes::from_static(b"one"), "")
            .await
            .unwrap();
        store
            .put("v/juicefs_uuid", Bytes::from_static(b"two"), "")
            .await
            .unwrap();
        assert_eq!(
            &store.get("v/juicefs_uuid", 0, 10).await.unwrap()[..],
            b"two"
        );
        // ...with nothing left beside them
        assert_eq!(files("v/chunks/0/0"), vec!["7_0_8192", "8_0_3"]);
        assert_eq!(files("v"), vec!["chunks", "juicefs_uuid"]);
    }

    #[tokio::test]
    async fn refuses_keys_outside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().to_str().unwrap()).unwrap();
        assert!(store.put("../x", Bytes::new(), "").await.is_err());
        assert!(store.put("/abs", Bytes::new(), "").await.is_err());
        assert!(FileStore::new("relative/dir").is_err());
    }

    #[tokio::test]
    async fn classes_live_beside_the_object_and_archives_need_a_restore() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().to_str().unwrap()).unwrap();
        let key = "v/chunks/0/0/1_0_5";
        store
            .put(key, Bytes::from_static(b"hello"), "")
            .await
            .unwrap();
        assert_eq!(store.head(key).await.unwrap().class, "");
        store.set_class(key, "STANDARD_IA").await.unwrap();
        assert_eq!(store.head(key).await.unwrap().class, "STANDARD_IA");
        store.set_class(key, "GLACIER").await.unwrap();
        assert!(store.head(key).await.unwrap().archived);
        let err = store.get(key, 0, 5).await.unwrap_err();
        assert!(err.to_string().contains("InvalidObjectState"), "{err}");
        assert!(!store.restore(key).await.unwrap());
        assert!(store.restore(key).await.unwrap());
        assert_eq!(&store.get(key, 0, 5).await.unwrap()[..], b"hello");
        // listing shows objects only; deleting takes the class along
        let listed = store.list("v/").await.unwrap();
        assert_eq!(listed.len(), 1);
        store.delete(key).await.unwrap();
        assert!(std::fs::read_dir(dir.path().join("v/chunks/0/0"))
            .unwrap()
            .next()
            .is_none());
    }
}
