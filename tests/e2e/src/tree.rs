//! Trees of files: a varied one to copy, a snapshot of what a tree holds, the check that two are the same, and that one mount sees what another changed in a tree.
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::ok;
use crate::random::pattern;

/// Everything of one entry a faithful copy keeps: type and mode, owner,
/// size, mtime to the nanosecond, the bytes or the link target, the other
/// names of its inode (hard links), and every xattr (ACLs included) by value.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub mode: String,
    pub owner: (u32, u32),
    pub size: u64,
    pub rdev: u64,
    pub mtime: (i64, i64),
    pub content: Vec<u8>,
    pub links: Vec<String>,
    pub xattrs: Vec<(String, Vec<u8>)>,
}

pub fn xattrs(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut names = vec![0u8; 65536];
    let n = rustix::fs::llistxattr(path, &mut names).unwrap();
    let mut out: Vec<(String, Vec<u8>)> = names[..n]
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .map(|name| {
            let name = String::from_utf8_lossy(name).to_string();
            let mut value = vec![0u8; 65536];
            let len = rustix::fs::lgetxattr(path, name.as_str(), &mut value).unwrap();
            value.truncate(len);
            (name, value)
        })
        .collect();
    out.sort();
    out
}

/// Every entry under `root` by its path relative to it (bytes that are not
/// printable ASCII escaped, as `\xff`, `\n`).
pub fn snapshot(root: &Path) -> BTreeMap<String, Entry> {
    // (the relative path, its name for people: bytes that are not UTF-8 escaped)
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, String, fs::Metadata)>) {
        for e in fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let key = rel.as_os_str().as_bytes().escape_ascii().to_string();
            out.push((rel, key, meta.clone()));
            if meta.is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut all = Vec::new();
    walk(root, root, &mut all);
    let mut by_inode: HashMap<u64, Vec<String>> = HashMap::new();
    for (_, key, meta) in &all {
        if !meta.is_dir() {
            by_inode.entry(meta.ino()).or_default().push(key.clone());
        }
    }
    all.iter()
        .map(|(rel, key, meta)| {
            let path = root.join(rel);
            let content = if meta.is_file() {
                fs::read(&path).unwrap()
            } else if meta.file_type().is_symlink() {
                fs::read_link(&path).unwrap().into_os_string().into_vec()
            } else {
                Vec::new()
            };
            let mut links = by_inode.get(&meta.ino()).cloned().unwrap_or_default();
            links.sort();
            let entry = Entry {
                mode: format!("{:o}", meta.mode()),
                owner: (meta.uid(), meta.gid()),
                size: if meta.is_dir() { 0 } else { meta.len() },
                rdev: meta.rdev(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                content,
                links,
                xattrs: xattrs(&path),
            };
            (key.clone(), entry)
        })
        .collect()
}

/// Asserts `copy` holds exactly what `source` does, naming what differs.
pub fn assert_same_tree(tool: &str, source: &Path, copy: &Path) {
    let want = snapshot(source);
    let got = snapshot(copy);
    let names = |t: &BTreeMap<String, Entry>| t.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&want), names(&got), "{tool}: the names differ");
    for (rel, w) in &want {
        let g = &got[rel];
        assert!(
            w == g,
            "{tool}: {rel} differs:\n  source {:?}\n  copy   {:?}",
            Entry {
                content: Vec::new(),
                ..w.clone()
            },
            Entry {
                content: Vec::new(),
                ..g.clone()
            },
        );
        assert_eq!(w.content, g.content, "{tool}: content of {rel}");
    }
}

/// A tree with what copies tend to lose: special mode bits, other owners,
/// nanosecond times on files, directories and symlinks, hard links,
/// symlinks (one dangling), a fifo, user xattrs, access and default ACLs.
pub fn make_varied_tree(src: &Path) {
    for d in ["bin", "shared", "team", "team/inner", "private", "empty"] {
        fs::create_dir_all(src.join(d)).unwrap();
    }
    let files: [(&str, &str, &str, usize); 9] = [
        ("readme", "0644", "0:0", 5_000),
        ("private/key", "0600", "1000:1000", 64),
        ("bin/tool", "0755", "0:0", 70_000),
        ("bin/setuid", "4755", "0:0", 10),
        ("bin/setgid", "2751", "0:50", 10),
        ("shared/big", "0664", "1234:5678", 3 * 1024 * 1024 + 17),
        ("shared/empty", "0444", "0:0", 0),
        ("team/notes", "0660", "1000:100", 300),
        ("team/inner/deep", "0640", "4294967294:1", 1),
    ];
    for (i, (rel, mode, owner, len)) in files.iter().enumerate() {
        let path = src.join(rel);
        fs::write(&path, pattern(i as u64 + 1, *len)).unwrap();
        ok(Command::new("chown").arg(owner).arg(&path));
        ok(Command::new("chmod").arg(mode).arg(&path));
    }
    fs::hard_link(src.join("readme"), src.join("bin/readme-hard")).unwrap();
    fs::hard_link(src.join("readme"), src.join("team/readme-too")).unwrap();
    std::os::unix::fs::symlink("../bin/tool", src.join("shared/tool-link")).unwrap();
    std::os::unix::fs::symlink("nowhere/at/all", src.join("dangling")).unwrap();
    ok(Command::new("chown")
        .args(["-h", "1000:1000"])
        .arg(src.join("dangling")));
    ok(Command::new("mkfifo").arg(src.join("team/pipe")));
    for (rel, name, value) in [
        ("readme", "user.color", &b"blue"[..]),
        ("readme", "user.empty", b""),
        ("shared/big", "user.checksum", b"\x00\x01binary\xff"),
        ("team", "user.owner", b"team"),
    ] {
        rustix::fs::lsetxattr(src.join(rel), name, value, rustix::fs::XattrFlags::empty()).unwrap();
    }
    ok(Command::new("setfacl")
        .args(["-m", "u:1000:rw,g:2000:r"])
        .arg(src.join("team/notes")));
    ok(Command::new("setfacl")
        .args(["-m", "u:1000:rwx,d:u:1000:rwx,d:g::r-x,d:o::---"])
        .arg(src.join("team")));
    ok(Command::new("chmod").arg("1777").arg(src.join("shared")));
    ok(Command::new("chmod")
        .arg("2770")
        .arg(src.join("team/inner")));
    ok(Command::new("chmod").arg("0700").arg(src.join("private")));
    // times last, deepest first, so no later change moves them
    let mut all: Vec<PathBuf> = Vec::new();
    ok(Command::new("find").arg(src).arg("-depth").arg("-print0"))
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .for_each(|p| all.push(PathBuf::from(std::ffi::OsStr::from_bytes(p))));
    for (i, path) in all.iter().enumerate() {
        ok(Command::new("touch")
            .arg("-h")
            .args([
                "-d",
                &format!(
                    "2011-0{}-0{} 10:10:10.{:09}",
                    i % 9 + 1,
                    i % 7 + 1,
                    123_456_789 + i
                ),
            ])
            .arg(path));
    }
}

/// Changes two files of `dir` (made by `Volume::files_in_sql`) through
/// mount `other`, f2500's length and f2600 gone, and asserts that mount
/// `seer` shows both soon, whatever it or its kernel held of them.
pub fn changes_elsewhere_are_seen(seer: &crate::Mount, other: &crate::Mount, dir: &str) {
    use std::fs;
    fs::OpenOptions::new()
        .write(true)
        .open(other.p(&format!("{dir}/f2500")))
        .unwrap()
        .set_len(123_456)
        .unwrap();
    fs::remove_file(other.p(&format!("{dir}/f2600"))).unwrap();
    assert!(
        crate::eventually(5, || fs::metadata(seer.p(&format!("{dir}/f2500")))
            .is_ok_and(|meta| meta.len() == 123_456)),
        "another mount's truncate"
    );
    assert!(
        crate::eventually(5, || fs::metadata(seer.p(&format!("{dir}/f2600"))).is_err()),
        "another mount's unlink"
    );
    assert_eq!(
        fs::metadata(seer.p(&format!("{dir}/f2700"))).unwrap().len(),
        2700
    );
}
