//! A long run of random calls with hostile arguments on a mount, made alike
//! on a directory of the local disk (ext4): names of 255 and 256 bytes, not
//! UTF-8, ".", "..", with control characters; symlinks in loops and with
//! targets of 4095 and 4096 bytes; xattr names of 255 and 256 bytes and
//! values past 64 KiB; renames into themselves; offsets and lengths near
//! every power of two up to 2^63. Where Linux answers a call the same on
//! every file system (the kernel or POSIX decides it), the mount must
//! answer it as the local directory does; the bytes of a file written at
//! hostile offsets must be what a model of it holds, on this mount and on
//! another (nothing lost, nothing misplaced); offsets past each file
//! system's largest file are EFBIG, as each one's own limit says (jfs:
//! 2^57 minus one byte; ext4: 16 TiB). A failure prints the seed and the
//! op; `JFS_HOSTILE_SEED=N` reruns one, `JFS_HOSTILE_OPS=N` sets the length.
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use jfs_e2e::{Rng, Volume};
use rustix::fs::XattrFlags;

/// jfs's largest file (docs/limits.md).
const JFS_MAX_FILE: u64 = (1 << 57) - 1;

fn errno<T>(r: std::io::Result<T>) -> Result<T, i32> {
    r.map_err(|e| e.raw_os_error().unwrap_or(-1))
}

fn rerrno<T>(r: rustix::io::Result<T>) -> Result<T, i32> {
    r.map_err(|e| e.raw_os_error())
}

/// The names a run picks from.
fn hostile_names() -> Vec<Vec<u8>> {
    vec![
        b"plain".to_vec(),
        vec![b'n'; 255],
        vec![b'n'; 256],
        vec![b'm'; 254],
        b"\xff\xfe not utf-8 \xc3".to_vec(),
        b".".to_vec(),
        b"..".to_vec(),
        b"...".to_vec(),
        b"line\nbreak\ttab".to_vec(),
        b" ".to_vec(),
        b"-rf".to_vec(),
        "caf\u{e9} \u{1F600}".as_bytes().to_vec(),
    ]
}

/// Offsets near every power of two, up to 2^63 - 1.
fn hostile_offset(rng: &mut Rng) -> u64 {
    let k = rng.below(64) as u32;
    let base = if k == 63 { (1u64 << 63) - 1 } else { 1u64 << k };
    match rng.below(3) {
        0 => base,
        1 => base.saturating_sub(1 + rng.below(3)),
        _ => base.saturating_add(rng.below(3)).min((1u64 << 63) - 1),
    }
}

/// The bytes written at hostile offsets, as jfs must hold them.
#[derive(Default)]
struct DataModel {
    len: u64,
    /// (offset, bytes) of every write, in order (later ones win).
    writes: Vec<(u64, Vec<u8>)>,
}

impl DataModel {
    /// What a pwrite of `data` at `offset` answers on jfs, and its effect.
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<usize, i32> {
        if offset >= JFS_MAX_FILE {
            return Err(libc::EFBIG);
        }
        let n = data.len().min((JFS_MAX_FILE - offset) as usize);
        self.writes.push((offset, data[..n].to_vec()));
        self.len = self.len.max(offset + n as u64);
        Ok(n)
    }

    fn truncate(&mut self, len: u64) -> Result<(), i32> {
        if len > JFS_MAX_FILE {
            return Err(libc::EFBIG);
        }
        for (off, bytes) in &mut self.writes {
            if *off >= len {
                bytes.clear();
            } else if *off + bytes.len() as u64 > len {
                bytes.truncate((len - *off) as usize);
            }
        }
        self.len = len;
        Ok(())
    }

    /// The byte at `at`.
    fn byte(&self, at: u64) -> Option<u8> {
        if at >= self.len {
            return None;
        }
        let mut b = 0;
        for (off, bytes) in &self.writes {
            if at >= *off && at < *off + bytes.len() as u64 {
                b = bytes[(at - off) as usize];
            }
        }
        Some(b)
    }

    /// Every written byte's place, and the bytes around each write.
    fn check(&self, f: &File, trail: &str) {
        assert_eq!(f.metadata().unwrap().len(), self.len, "length; {trail}");
        for (off, bytes) in &self.writes {
            let from = off.saturating_sub(1);
            let to = (off + bytes.len() as u64 + 1).min(self.len);
            if to <= from {
                continue;
            }
            let mut got = vec![0u8; (to - from) as usize];
            let n = f.read_at(&mut got, from).unwrap();
            got.truncate(n);
            let want: Vec<u8> = (from..to).filter_map(|at| self.byte(at)).collect();
            assert_eq!(got, want, "bytes at {from}..{to}; {trail}");
        }
    }
}

/// One run: `ops` random calls on `jfs` and `local` (each a directory).
fn run(jfs: &Path, local: &Path, other: &Path, seed: u64, ops: usize) {
    let mut rng = Rng::new(seed);
    let names = hostile_names();
    let data_path = |root: &Path| root.join("data");
    let open_data = |root: &Path| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(data_path(root))
            .unwrap()
    };
    let (jdata, ldata) = (open_data(jfs), open_data(local));
    let mut model = DataModel::default();
    let mut trail: Vec<String> = Vec::new();
    for op in 0..ops {
        let name = names[rng.index(names.len())].clone();
        let at = |root: &Path, name: &[u8]| root.join(OsStr::from_bytes(name));
        let what = rng.below(9);
        let said = format!("op {op}: {what} {:?}", String::from_utf8_lossy(&name));
        trail.push(said.clone());
        if trail.len() > 12 {
            trail.remove(0);
        }
        let context = || format!("seed {seed}, {said}; last ops {trail:?}");
        // (calls whose answer Linux decides alike on every file system)
        let same = |j: Result<(), i32>, l: Result<(), i32>| {
            assert_eq!(j, l, "jfs vs ext4: {}", context());
        };
        match what {
            0 => {
                let create = |root: &Path| {
                    errno(
                        OpenOptions::new()
                            .write(true)
                            .create(true)
                            .truncate(false)
                            .mode(0o644)
                            .open(at(root, &name))
                            .map(drop),
                    )
                };
                same(create(jfs), create(local));
            }
            1 => {
                let mkdir = |root: &Path| errno(fs::create_dir(at(root, &name)));
                same(mkdir(jfs), mkdir(local));
            }
            2 => {
                // a target of 4095 bytes is the longest (PATH_MAX with its NUL)
                let target: Vec<u8> = match rng.below(4) {
                    0 => vec![b't'; 4095],
                    1 => vec![b't'; 4096],
                    2 => b"loop-b".to_vec(),
                    _ => name.clone(),
                };
                let link = |root: &Path| {
                    errno(std::os::unix::fs::symlink(
                        OsStr::from_bytes(&target),
                        at(root, &name),
                    ))
                };
                same(link(jfs), link(local));
                let other_end = |root: &Path| {
                    let _ = std::os::unix::fs::symlink("loop-a", root.join("loop-b"));
                    let _ = std::os::unix::fs::symlink("loop-b", root.join("loop-a"));
                    errno(File::open(at(root, &name)).map(drop))
                };
                same(other_end(jfs), other_end(local));
            }
            3 => {
                let xname_len = [1usize, 200, 250, 251, 300][rng.index(5)];
                let mut xname = b"user.".to_vec();
                xname.extend(std::iter::repeat_n(b'x', xname_len));
                // (ext4 keeps a file's xattrs in one block: past 2 KiB and
                // up to 64 KiB each file system answers its own way; each is
                // removed again so that ext4's block never fills)
                let len = [0usize, 100, 2000, 65537, 1 << 20][rng.index(5)];
                let value = vec![b'v'; len];
                let set = |root: &Path| {
                    let set = rerrno(rustix::fs::setxattr(
                        data_path(root),
                        OsStr::from_bytes(&xname),
                        &value,
                        XattrFlags::empty(),
                    ));
                    let got = rerrno(rustix::fs::getxattr(
                        data_path(root),
                        OsStr::from_bytes(&xname),
                        &mut vec![0u8; 1 << 17],
                    ));
                    let _ = rustix::fs::removexattr(data_path(root), OsStr::from_bytes(&xname));
                    (set, got)
                };
                let (j, l) = (set(jfs), set(local));
                assert_eq!(j, l, "setxattr, then getxattr: {}", context());
            }
            4 => {
                let offset = hostile_offset(&mut rng);
                let data: Vec<u8> = (0..1 + rng.below(3))
                    .map(|_| rng.below(256) as u8)
                    .collect();
                let got = errno(jdata.write_at(&data, offset));
                let want = if offset
                    .checked_add(data.len() as u64)
                    .is_none_or(|e| e > i64::MAX as u64)
                {
                    // (the kernel's own EINVAL: the range's end is no loff_t)
                    Err(libc::EINVAL)
                } else {
                    model.write(offset, &data)
                };
                assert_eq!(
                    got,
                    want,
                    "pwrite of {} at {offset}: {}",
                    data.len(),
                    context()
                );
                // ext4's own limit: EFBIG, never a misplaced byte
                if let Err(e) = errno(ldata.write_at(&data, offset)) {
                    assert!(
                        [libc::EFBIG, libc::EINVAL].contains(&e),
                        "ext4 pwrite at {offset}: {e}"
                    );
                }
            }
            5 => {
                let len = hostile_offset(&mut rng);
                let got = errno(jdata.set_len(len));
                assert_eq!(got, model.truncate(len), "truncate to {len}: {}", context());
                let _ = ldata.set_len(len.min(1 << 40));
            }
            6 => {
                let mut buf = [0u8; 8];
                let offset = hostile_offset(&mut rng);
                // (a range whose end is no loff_t is the kernel's EINVAL)
                let local = errno(ldata.read_at(&mut [0u8; 8], offset)).map(|_| ());
                let n = match errno(jdata.read_at(&mut buf, offset)) {
                    Ok(n) => n,
                    Err(e) => {
                        assert_eq!(Err(e), local, "pread at {offset}: {}", context());
                        continue;
                    }
                };
                let want: Vec<u8> = (offset..offset.saturating_add(8))
                    .map_while(|a| model.byte(a))
                    .collect();
                assert_eq!(&buf[..n], &want[..], "pread at {offset}: {}", context());
            }
            7 => {
                // into itself, onto "." or "..", over a non-empty directory
                let (from, to): (PathBuf, PathBuf) = match rng.below(3) {
                    0 => (PathBuf::from("dir"), PathBuf::from("dir/sub/moved")),
                    1 => (PathBuf::from("dir"), PathBuf::from(".")),
                    _ => (PathBuf::from("full"), PathBuf::from("dir")),
                };
                let rename = |root: &Path| {
                    let _ = fs::create_dir_all(root.join("dir/sub"));
                    let _ = fs::create_dir_all(root.join("full/x"));
                    errno(fs::rename(root.join(&from), root.join(&to)))
                };
                same(rename(jfs), rename(local));
            }
            _ => {
                let dir = rng.below(2) == 1;
                let remove = |root: &Path| match dir {
                    false => errno(fs::remove_file(at(root, &name))),
                    true => errno(fs::remove_dir(at(root, &name))),
                };
                same(remove(jfs), remove(local));
            }
        }
    }
    jdata.sync_all().unwrap();
    model.check(&jdata, &format!("seed {seed}, this mount"));
    let reread = File::open(data_path(other)).unwrap();
    model.check(&reread, &format!("seed {seed}, another mount"));
    // the same names, made and removed alike
    let listing = |root: &Path| {
        let mut names: Vec<Vec<u8>> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .filter(|n| n != b"lost+found")
            .collect();
        names.sort();
        names
    };
    assert_eq!(listing(jfs), listing(local), "the names, seed {seed}");
}

#[test]
fn hostile_arguments_answer_as_linux_does_and_move_no_byte() {
    let v = Volume::new("hostile");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    let ops = std::env::var("JFS_HOSTILE_OPS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1500);
    let seeds: Vec<u64> = match std::env::var("JFS_HOSTILE_SEED") {
        Ok(s) => vec![s.parse().expect("JFS_HOSTILE_SEED is a number")],
        Err(_) => vec![1, 2, 0x5eed_u64 ^ std::process::id() as u64],
    };
    for seed in seeds {
        let dir = format!("run-{seed}");
        fs::create_dir(a.p(&dir)).unwrap();
        let local = tempfile::Builder::new()
            .prefix("jfs-hostile-")
            .tempdir_in("/var/tmp")
            .unwrap();
        eprintln!("hostile run: seed {seed}, {ops} ops");
        run(&a.p(&dir), local.path(), &b.p(&dir), seed, ops);
    }
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
