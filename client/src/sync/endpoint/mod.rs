//! The two sides of a sync: a local directory, a jfs volume used without a
//! mount, or an S3 prefix, behind one interface (list, read, write, remove).
//!
//! The forms of an endpoint:
//! - a local path: `/data/dir` or `file:///data/dir`;
//! - a jfs volume: `jfs+` before its META_URL, the directory inside the
//!   volume after a `#` (the root when left out):
//!   `jfs+postgres://user@%2Frun%2Fpostgresql:5432/db#/projects/a` or
//!   `jfs+postgres://user@/db?host=/run/postgresql#/projects/a`;
//! - an S3 prefix: `s3://bucket/prefix`, the server from `--s3-endpoint`.
mod jfs;
mod local;
mod s3;

use async_trait::async_trait;
use bytes::Bytes;

/// What a listed entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

/// One entry under an endpoint's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The path under the root, `/`-separated, without a leading slash.
    pub path: String,
    pub kind: Kind,
    pub size: u64,
    /// Nanoseconds since the epoch (an object's upload time on S3).
    pub mtime: i64,
    /// The permission bits.
    pub mode: u32,
    /// A symlink's target.
    pub target: Option<Vec<u8>>,
}

/// A file's bytes, a piece at a time.
#[async_trait]
pub trait Reader: Send {
    /// The next piece; `None` at the end.
    async fn next_piece(&mut self) -> anyhow::Result<Option<Bytes>>;
}

/// A file being written: under a temporary name until `finish` puts it in
/// place (with the source's mode and mtime where the endpoint keeps them).
#[async_trait]
pub trait Writer: Send {
    async fn write(&mut self, data: Bytes) -> anyhow::Result<()>;
    /// Makes the file durable and gives it its final name.
    async fn finish(self: Box<Self>) -> anyhow::Result<()>;
    /// Drops what was written (the temporary name removed).
    async fn abort(self: Box<Self>);
}

/// One side of a sync.
#[async_trait]
pub trait Endpoint: Send + Sync {
    /// The endpoint as the user named it (passwords hidden).
    fn describe(&self) -> String;
    /// Whether files keep a modification time and mode set on them (S3's
    /// objects do not: their time is their upload's).
    fn keeps_attrs(&self) -> bool;
    /// Whether directories and symlinks exist as entries (not on S3).
    fn keeps_tree(&self) -> bool;
    /// Checks the root exists (a source), or makes it (a destination).
    async fn prepare(&self, create: bool) -> anyhow::Result<()>;
    /// Every entry under the root, sorted by path.
    async fn list(&self) -> anyhow::Result<Vec<Entry>>;
    async fn open(&self, path: &str) -> anyhow::Result<Box<dyn Reader>>;
    /// Starts writing file `path` as a copy of `source` (its size, mode, mtime).
    async fn create(&self, path: &str, source: &Entry) -> anyhow::Result<Box<dyn Writer>>;
    async fn mkdir(&self, path: &str, mode: u32) -> anyhow::Result<()>;
    /// Sets a directory's mode and mtime (after its entries are written).
    async fn set_dir_attrs(&self, path: &str, mode: u32, mtime: i64) -> anyhow::Result<()>;
    /// Makes (or replaces) symlink `path` pointing at `target`.
    async fn symlink(&self, path: &str, target: &[u8]) -> anyhow::Result<()>;
    /// Removes a file, a symlink or an empty directory.
    async fn remove(&self, entry: &Entry) -> anyhow::Result<()>;
    /// Commits what is pending and lets go of the endpoint.
    async fn close(&self);
}

/// Where a sync's S3 endpoints are.
#[derive(Debug, Clone, Default)]
pub struct S3Options {
    /// `http(s)://host:port` of an S3-compatible server (path-style
    /// addressing); AWS itself when none.
    pub endpoint: Option<String>,
}

/// The endpoint `spec` names, connected (a volume attached, read-only
/// unless `writing`: a source may be a hot standby).
pub async fn open(spec: &str, s3: &S3Options, writing: bool) -> anyhow::Result<Box<dyn Endpoint>> {
    match parse(spec)? {
        Spec::Local(root) => Ok(Box::new(local::LocalTree::new(root))),
        Spec::Jfs { meta_url, dir } => Ok(Box::new(
            jfs::JfsTree::attach(&meta_url, &dir, !writing).await?,
        )),
        Spec::S3 { bucket, prefix } => {
            Ok(Box::new(s3::S3Tree::connect(&bucket, &prefix, s3).await?))
        }
    }
}

/// Refuses a source and a destination that hold one another (a sync of
/// `/data/sub` onto `/data` with `--delete-dst` would delete its own
/// source; of `/data` onto `/data/sub`, nest itself deeper every run).
pub fn refuse_overlap(src: &str, dst: &str) -> anyhow::Result<()> {
    let nested = |a: &str, b: &str| {
        let (a, b) = (a.trim_end_matches('/'), b.trim_end_matches('/'));
        a == b
            || a.is_empty()
            || b.is_empty()
            || b.starts_with(&format!("{a}/"))
            || a.starts_with(&format!("{b}/"))
    };
    let overlap = match (parse(src)?, parse(dst)?) {
        (Spec::Local(a), Spec::Local(b)) => {
            let (a, b) = (absolute(&a), absolute(&b));
            nested(&a.to_string_lossy(), &b.to_string_lossy())
        }
        (
            Spec::Jfs {
                meta_url: a,
                dir: x,
            },
            Spec::Jfs {
                meta_url: b,
                dir: y,
            },
        ) => a == b && nested(&x, &y),
        (
            Spec::S3 {
                bucket: a,
                prefix: x,
            },
            Spec::S3 {
                bucket: b,
                prefix: y,
            },
        ) => a == b && nested(&x, &y),
        _ => false,
    };
    anyhow::ensure!(
        !overlap,
        "the source and the destination hold one another: sync between trees apart"
    );
    Ok(())
}

/// `path` made absolute with its symlinks resolved, as far as it exists
/// (a destination may not exist yet).
fn absolute(path: &std::path::Path) -> std::path::PathBuf {
    let mut missing = Vec::new();
    let mut at = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    loop {
        if let Ok(real) = at.canonicalize() {
            return missing.into_iter().rev().fold(real, |p, name| p.join(name));
        }
        match (at.file_name().map(|n| n.to_os_string()), at.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name);
                at = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// An endpoint's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Spec {
    Local(std::path::PathBuf),
    Jfs { meta_url: String, dir: String },
    S3 { bucket: String, prefix: String },
}

const FORMS: &str = "a local path (/data/dir), a jfs volume \
    (jfs+postgres://user@host:port/db?options#/dir/in/volume) or an S3 prefix (s3://bucket/prefix)";

fn parse(spec: &str) -> anyhow::Result<Spec> {
    anyhow::ensure!(!spec.is_empty(), "an empty endpoint: give {FORMS}");
    let Some((scheme, rest)) = spec.split_once("://") else {
        return Ok(Spec::Local(spec.into()));
    };
    match scheme {
        "file" => {
            anyhow::ensure!(
                rest.starts_with('/'),
                "{spec:?}: a file URL names an absolute path (file:///data/dir)"
            );
            Ok(Spec::Local(rest.into()))
        }
        "jfs+postgres" | "jfs+postgresql" => {
            let (url, dir) = match spec["jfs+".len()..].split_once('#') {
                Some((url, dir)) => (url, dir),
                None => (&spec["jfs+".len()..], "/"),
            };
            // (a # inside the password would cut the URL there: never echo it)
            anyhow::ensure!(
                !dir.contains('@'),
                "a jfs endpoint with a # in its META_URL: percent-encode a # in the password as %23"
            );
            let dir = dir.trim_matches('/');
            anyhow::ensure!(
                !dir.split('/').any(|c| c == "." || c == ".."),
                "{}: the directory after # may not hold . or ..",
                crate::meta::redact_url(url)
            );
            anyhow::ensure!(
                rest.len() > 1 && !url.ends_with("://"),
                "{}: give the volume's META_URL after jfs+ ({FORMS})",
                crate::meta::redact_url(spec)
            );
            Ok(Spec::Jfs {
                meta_url: url.to_string(),
                dir: dir.to_string(),
            })
        }
        "s3" => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            anyhow::ensure!(
                !bucket.is_empty(),
                "{spec:?} names no bucket: s3://bucket/prefix"
            );
            let prefix = prefix.trim_matches('/');
            Ok(Spec::S3 {
                bucket: bucket.to_string(),
                prefix: if prefix.is_empty() {
                    String::new()
                } else {
                    format!("{prefix}/")
                },
            })
        }
        "postgres" | "postgresql" => anyhow::bail!(
            "{}: a volume is named jfs+{scheme}://... (the META_URL after jfs+, \
             the directory in the volume after #)",
            crate::meta::redact_url(spec)
        ),
        other => anyhow::bail!(
            "unknown endpoint scheme {other:?} in {}: give {FORMS}",
            crate::meta::redact_url(spec)
        ),
    }
}

/// The name a file is written under before it is complete: in its own
/// directory, hidden, and the same on every run (a run after an interrupted
/// one overwrites or removes it).
pub fn temp_name(path: &str) -> String {
    use sha2::Digest;
    let (dir, _) = split_parent(path);
    let digest = sha2::Sha256::digest(path.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("{TEMP_PREFIX}{hex}{TEMP_SUFFIX}");
    match dir {
        "" => name,
        dir => format!("{dir}/{name}"),
    }
}

const TEMP_PREFIX: &str = ".jfs-sync-";
const TEMP_SUFFIX: &str = ".tmp";

/// Whether `path` is a temporary of an unfinished copy (as [`temp_name`]
/// makes them: 16 lower-case hex digits between its prefix and suffix).
pub fn is_temp(path: &str) -> bool {
    let (_, name) = split_parent(path);
    name.len() == TEMP_PREFIX.len() + 16 + TEMP_SUFFIX.len()
        && name.starts_with(TEMP_PREFIX)
        && name.ends_with(TEMP_SUFFIX)
        && name[TEMP_PREFIX.len()..TEMP_PREFIX.len() + 16]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The mode bits a copy keeps: permissions and the sticky bit, not
/// set-user-ID or set-group-ID (the owner is not kept: a root-run sync
/// would make another user's set-user-ID file root's).
pub const KEPT_MODE: u32 = 0o1777;

/// Whether `path` is names joined by single slashes, none of them `.` or
/// `..` (an S3 key that is not cannot be a path under a local root).
pub fn is_plain_path(path: &str) -> bool {
    path.split('/')
        .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// `path`'s directory ("" at the root) and last name.
pub fn split_parent(path: &str) -> (&str, &str) {
    match path.rsplit_once('/') {
        Some((dir, name)) => (dir, name),
        None => ("", path),
    }
}

/// `path` under `root` ("" is the root itself).
fn joined(root: &str, path: &str) -> String {
    match (root.is_empty(), path.is_empty()) {
        (true, _) => path.to_string(),
        (false, true) => root.to_string(),
        (false, false) => format!("{root}/{path}"),
    }
}

/// Bytes read per piece from a file.
pub const PIECE: usize = 4 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_by_scheme() {
        assert_eq!(parse("/a/b/").unwrap(), Spec::Local("/a/b/".into()));
        assert_eq!(parse("rel").unwrap(), Spec::Local("rel".into()));
        assert_eq!(parse("file:///a").unwrap(), Spec::Local("/a".into()));
        assert_eq!(
            parse("jfs+postgres://u@%2Ftmp:5432/db?sslmode=disable#/x/y/").unwrap(),
            Spec::Jfs {
                meta_url: "postgres://u@%2Ftmp:5432/db?sslmode=disable".into(),
                dir: "x/y".into()
            }
        );
        assert_eq!(
            parse("jfs+postgresql://u@/db?host=/run/pg").unwrap(),
            Spec::Jfs {
                meta_url: "postgresql://u@/db?host=/run/pg".into(),
                dir: "".into()
            }
        );
        assert_eq!(
            parse("s3://b/p/q/").unwrap(),
            Spec::S3 {
                bucket: "b".into(),
                prefix: "p/q/".into()
            }
        );
        assert_eq!(
            parse("s3://b").unwrap(),
            Spec::S3 {
                bucket: "b".into(),
                prefix: "".into()
            }
        );
        for bad in [
            "",
            "s3:///p",
            "ftp://x/y",
            "postgres://u@h/db",
            "jfs+postgres://",
            "jfs+postgres://u@h/db#/a/../b",
            "file://rel",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        let e = parse("postgres://u:secret@h/db").unwrap_err().to_string();
        assert!(e.contains("jfs+postgres") && !e.contains("secret"), "{e}");
    }

    #[test]
    fn temporaries_are_recognised_and_stable() {
        let t = temp_name("a/b/file.txt");
        assert!(t.starts_with("a/b/.jfs-sync-"), "{t}");
        assert_eq!(t, temp_name("a/b/file.txt"));
        assert_ne!(t, temp_name("a/b/other"));
        assert!(is_temp(&t));
        assert!(is_temp(&temp_name("top")));
        assert!(!is_temp("a/.jfs-sync-x.tmp"));
        assert!(!is_temp("a/b/file.txt"));
        assert!(is_plain_path("a/b.c/d"));
        for bad in ["", "a//b", "../x", "a/./b", "a/..", "/a"] {
            assert!(!is_plain_path(bad), "{bad:?}");
        }
        assert_eq!(joined("", "a"), "a");
        assert_eq!(joined("r", ""), "r");
        assert_eq!(joined("r", "a"), "r/a");
    }
}
