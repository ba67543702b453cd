//! Long random runs of namespace operations (create, mkdir, unlink, rmdir,
//! rename, link, symlink, rewrite, chmod, truncate, stat, lookups of
//! missing names, readdir, every free name of a directory made a file in a
//! row, every file of a directory removed in a row, a listing by the other
//! mount at once) against an in-memory model, on two mounts of
//! one volume with the kernel's caches at 30 s and the mounts' own caches
//! (attributes and names, complete listings answering missing names) on;
//! now and then the kernel drops its caches, so that the mounts' own
//! answer what it asks again. The mounts
//! take turns: a phase of operations on one, then a pause for the other to
//! read the change log, then both are compared with the whole model. Every
//! operation's result is compared with the model as it runs. A failure
//! prints the seed, the op number and the last ops; `JFS_MODEL_SEED=N`
//! reruns one seed, `JFS_NS_MODEL_OPS=N` sets the length of a run.
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use jfs_e2e::{Mount, Rng, ShardedVolume, Volume};

/// Long kernel caches (the mount defaults): what is stale is the mounts' to fix.
const CACHED: [&str; 4] = ["--attr-cache", "30", "--entry-cache", "30"];

/// Names each directory's entries are drawn from.
const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// Directories are made at most this deep.
const MAX_DEPTH: usize = 3;

/// Operations per turn of a mount.
const PHASE: usize = 200;

/// How long the other mount gets to read a phase's changes (far below the
/// kernel's 30 s caches; the change log is read every 50 ms).
const SETTLE: Duration = Duration::from_millis(500);

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Dir,
    /// A file: its model inode (hard links share it).
    File(u64),
    Symlink(String),
}

/// The namespace as it must be: relative paths ("" is the root).
#[derive(Default)]
struct Model {
    nodes: BTreeMap<String, Node>,
    /// Model inode -> its bytes.
    data: HashMap<u64, Vec<u8>>,
    /// Model inode -> its permission bits.
    modes: HashMap<u64, u32>,
    next_ino: u64,
    /// Directories of the root whose subtrees are on other shards (a
    /// volume over shards): path -> shard.
    shard_roots: BTreeMap<String, u16>,
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn depth(path: &str) -> usize {
    if path.is_empty() {
        0
    } else {
        path.matches('/').count() + 1
    }
}

fn under(path: &str, dir: &str) -> bool {
    path.len() > dir.len() + 1 && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

impl Model {
    /// The volume's root alone, or with shard roots `shard_roots` (names
    /// in the root, and their shards).
    fn new(shard_roots: &[(&str, u16)]) -> Model {
        let mut m = Model::default();
        m.nodes.insert(String::new(), Node::Dir);
        for (name, shard) in shard_roots {
            m.nodes.insert(name.to_string(), Node::Dir);
            m.shard_roots.insert(name.to_string(), *shard);
        }
        m
    }

    /// The shard that holds the node at `path`.
    fn shard(&self, path: &str) -> u16 {
        let top = path.split('/').next().unwrap_or("");
        self.shard_roots.get(top).copied().unwrap_or(0)
    }

    /// The shard that holds entry `path` (its directory's).
    fn entry_shard(&self, path: &str) -> u16 {
        match path.rsplit_once('/') {
            Some((dir, _)) => self.shard(dir),
            None => 0,
        }
    }

    /// Whether `path` is a shard root, whose name and node are on two
    /// databases: it is neither moved nor replaced (rmdir removes it).
    fn is_shard_root(&self, path: &str) -> bool {
        self.shard_roots.contains_key(path)
    }

    fn dirs(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| **n == Node::Dir)
            .map(|(p, _)| p.clone())
            .collect()
    }

    fn children(&self, dir: &str) -> BTreeSet<String> {
        self.nodes
            .keys()
            .filter(|p| {
                if dir.is_empty() {
                    !p.is_empty() && !p.contains('/')
                } else {
                    under(p, dir) && !p[dir.len() + 1..].contains('/')
                }
            })
            .map(|p| p.rsplit('/').next().unwrap().to_string())
            .collect()
    }

    /// A directory's link count: itself, its entry, and each subdirectory's "..".
    fn dir_nlink(&self, dir: &str) -> u64 {
        2 + self
            .children(dir)
            .iter()
            .filter(|n| self.nodes[&join(dir, n)] == Node::Dir)
            .count() as u64
    }

    fn nlink(&self, ino: u64) -> u64 {
        self.nodes
            .values()
            .filter(|n| **n == Node::File(ino))
            .count() as u64
    }

    /// rename(2)'s outcome: Ok, or the errno (names already checked to exist).
    fn rename(&mut self, from: &str, to: &str) -> Result<(), i32> {
        let Some(src) = self.nodes.get(from).cloned() else {
            return Err(libc::ENOENT);
        };
        if from == to {
            return Ok(());
        }
        if self.is_shard_root(from)
            || self.is_shard_root(to)
            || self.entry_shard(from) != self.entry_shard(to)
        {
            return Err(libc::EXDEV);
        }
        let dst = self.nodes.get(to).cloned();
        if src == Node::Dir {
            if under(to, from) {
                return Err(libc::EINVAL);
            }
            match &dst {
                Some(Node::Dir) if !self.children(to).is_empty() => return Err(libc::ENOTEMPTY),
                Some(Node::Dir) | None => {}
                Some(_) => return Err(libc::ENOTDIR),
            }
        } else if dst == Some(Node::Dir) {
            return Err(libc::EISDIR);
        } else if matches!(src, Node::File(_)) && dst == Some(src.clone()) {
            // two links of one file: nothing happens
            return Ok(());
        }
        let moved: Vec<(String, Node)> = self
            .nodes
            .iter()
            .filter(|(p, _)| *p == from || under(p, from))
            .map(|(p, n)| (format!("{to}{}", &p[from.len()..]), n.clone()))
            .collect();
        self.nodes.retain(|p, _| p != from && !under(p, from));
        self.remove(to);
        self.nodes.extend(moved);
        Ok(())
    }

    /// Drops entry `path` (its data when it was a file's last link).
    fn remove(&mut self, path: &str) {
        if let Some(Node::File(ino)) = self.nodes.remove(path) {
            if self.nlink(ino) == 0 {
                self.data.remove(&ino);
                self.modes.remove(&ino);
            }
        }
    }
}

fn errno_of(r: std::io::Result<()>) -> Result<(), i32> {
    r.map_err(|e| e.raw_os_error().unwrap_or(-1))
}

/// Runs one random operation on `m` and checks its result; returns what it did.
/// One random operation on mount `m` (`other`: the volume's other mount).
fn step(rng: &mut Rng, model: &mut Model, m: &Mount, other: &Mount) -> String {
    let dirs = model.dirs();
    let dir = dirs[rng.index(dirs.len())].clone();
    let path = join(&dir, NAMES[rng.index(NAMES.len())]);
    let p = m.p(&path);
    let existing = model.nodes.get(&path).cloned();
    let op = rng.index(100);
    let (what, got, want): (String, Result<(), i32>, Result<(), i32>) = match op {
        0..=17 => {
            let body = format!("{path}:{}", rng.next()).into_bytes();
            let got = errno_of(
                fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&p)
                    .and_then(|mut f| f.write_all(&body)),
            );
            let want = if existing.is_some() {
                Err(libc::EEXIST)
            } else {
                model.next_ino += 1;
                model.nodes.insert(path.clone(), Node::File(model.next_ino));
                model.data.insert(model.next_ino, body);
                // 0o666 less the test's umask
                model.modes.insert(model.next_ino, 0o644);
                Ok(())
            };
            ("create".into(), got, want)
        }
        18..=27 => {
            if existing.is_none() && depth(&path) > MAX_DEPTH {
                return format!("mkdir {path} (too deep: not tried)");
            }
            let got = errno_of(fs::create_dir(&p));
            let want = if existing.is_some() {
                Err(libc::EEXIST)
            } else {
                model.nodes.insert(path.clone(), Node::Dir);
                Ok(())
            };
            ("mkdir".into(), got, want)
        }
        28..=39 => {
            let got = errno_of(fs::remove_file(&p));
            let want = match existing {
                None => Err(libc::ENOENT),
                Some(Node::Dir) => Err(libc::EISDIR),
                Some(_) => {
                    model.remove(&path);
                    Ok(())
                }
            };
            ("unlink".into(), got, want)
        }
        40..=47 => {
            let got = errno_of(fs::remove_dir(&p));
            let want = match existing {
                None => Err(libc::ENOENT),
                Some(Node::Dir) if !model.children(&path).is_empty() => Err(libc::ENOTEMPTY),
                Some(Node::Dir) => {
                    // (an empty shard root goes too: its node, then its name)
                    model.nodes.remove(&path);
                    model.shard_roots.remove(&path);
                    Ok(())
                }
                Some(_) => Err(libc::ENOTDIR),
            };
            ("rmdir".into(), got, want)
        }
        48..=61 => {
            let dirs = model.dirs();
            let to_dir = &dirs[rng.index(dirs.len())];
            let to = join(to_dir, NAMES[rng.index(NAMES.len())]);
            let got = errno_of(fs::rename(&p, m.p(&to)));
            let want = model.rename(&path, &to);
            // the kernel may find a loop or a type clash first: the
            // outcome, not the errno, is what must match
            let (got, want) = (got.map_err(|_| 0), want.map_err(|_| 0));
            (format!("rename -> {to}"), got, want)
        }
        62..=67 => {
            let files: Vec<String> = model
                .nodes
                .iter()
                .filter(|(_, n)| matches!(n, Node::File(_)))
                .map(|(p, _)| p.clone())
                .collect();
            if files.is_empty() {
                return "link (no file)".into();
            }
            let src = files[rng.index(files.len())].clone();
            let got = errno_of(fs::hard_link(m.p(&src), &p));
            let want = if existing.is_some() {
                Err(libc::EEXIST)
            } else if model.shard(&src) != model.entry_shard(&path) {
                Err(libc::EXDEV)
            } else {
                let node = model.nodes[&src].clone();
                model.nodes.insert(path.clone(), node);
                Ok(())
            };
            (format!("link from {src}"), got, want)
        }
        68..=72 => {
            let target = format!("t{}", rng.index(1000));
            let got = errno_of(std::os::unix::fs::symlink(&target, &p));
            let want = if existing.is_some() {
                Err(libc::EEXIST)
            } else {
                model.nodes.insert(path.clone(), Node::Symlink(target));
                Ok(())
            };
            ("symlink".into(), got, want)
        }
        73..=76 => {
            let body = format!("rewritten {path}:{}", rng.next()).into_bytes();
            match existing {
                Some(Node::File(ino)) => {
                    let got = errno_of(fs::write(&p, &body));
                    model.data.insert(ino, body);
                    ("rewrite".into(), got, Ok(()))
                }
                _ => return format!("rewrite {path} (not a file)"),
            }
        }
        77..=78 => {
            let mode = [0o600, 0o640, 0o644, 0o755, 0o700][rng.index(5)];
            match existing {
                Some(Node::File(ino)) => {
                    let got = errno_of(fs::set_permissions(&p, fs::Permissions::from_mode(mode)));
                    model.modes.insert(ino, mode);
                    (format!("chmod {mode:o}"), got, Ok(()))
                }
                _ => return format!("chmod {path} (not a file)"),
            }
        }
        79 => {
            let len = rng.below(64);
            match existing {
                Some(Node::File(ino)) => {
                    let got = errno_of(
                        fs::OpenOptions::new()
                            .write(true)
                            .open(&p)
                            .and_then(|f| f.set_len(len)),
                    );
                    model.data.get_mut(&ino).unwrap().resize(len as usize, 0);
                    (format!("truncate to {len}"), got, Ok(()))
                }
                _ => return format!("truncate {path} (not a file)"),
            }
        }
        80..=89 => {
            // a lookup, of a name that may be missing
            let got = fs::symlink_metadata(&p);
            check_node(model, m, &path, &existing, got.as_ref().ok());
            if existing.is_none() {
                assert_eq!(
                    got.err().map(|e| e.kind()),
                    Some(ErrorKind::NotFound),
                    "stat {path}: model says missing"
                );
            }
            return format!("stat {path}");
        }
        90..=93 => {
            check_dir(model, m, &dir);
            return format!("readdir {dir:?}");
        }
        94 => {
            // every free name of a directory made a file in a row (untar's,
            // cp -a's way): after two, the mount answers the creates under
            // the directory's lease and commits them in batches; some are
            // written (made with their data's commit, or the batch
            // committed first), some made read-only, some left empty, some
            // looked at at once, and a few names made directories
            let free: Vec<String> = NAMES
                .iter()
                .map(|name| join(&dir, name))
                .filter(|p| !model.nodes.contains_key(p))
                .collect();
            for path in &free {
                if rng.index(8) == 0 && depth(path) <= MAX_DEPTH {
                    // a directory among the files (tar's and git's way):
                    // made through PostgreSQL, the lease kept
                    let got = errno_of(fs::create_dir(m.p(path)));
                    assert_eq!(got, Ok(()), "mkdir {path} of a directory filled");
                    model.nodes.insert(path.clone(), Node::Dir);
                    continue;
                }
                let body = match rng.index(3) {
                    0 => Vec::new(),
                    _ => format!("filled {path}:{}", rng.next()).into_bytes(),
                };
                let got = errno_of(
                    fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(m.p(path))
                        .and_then(|mut f| f.write_all(&body)),
                );
                assert_eq!(got, Ok(()), "create {path} of a directory filled");
                model.next_ino += 1;
                model.nodes.insert(path.clone(), Node::File(model.next_ino));
                model.data.insert(model.next_ino, body);
                model.modes.insert(model.next_ino, 0o644);
                if rng.index(4) == 0 {
                    let got = errno_of(fs::set_permissions(
                        m.p(path),
                        fs::Permissions::from_mode(0o600),
                    ));
                    assert_eq!(got, Ok(()), "chmod 600 {path} of a directory filled");
                    model.modes.insert(model.next_ino, 0o600);
                }
                if rng.index(2) == 0 {
                    // (its bytes read too: an open commits the batch)
                    let st = fs::symlink_metadata(m.p(path)).ok();
                    check_node(model, m, path, &model.nodes.get(path).cloned(), st.as_ref());
                }
            }
            return format!("fill {dir:?} ({} made)", free.len());
        }
        95 => {
            // every file and symlink of a directory removed in a row (rm
            // -rf's way): after two, the mount answers them under the
            // directory's lease and commits them in batches
            let gone: Vec<String> = model
                .children(&dir)
                .into_iter()
                .map(|name| join(&dir, &name))
                .filter(|p| !matches!(model.nodes[p], Node::Dir))
                .collect();
            for path in &gone {
                let got = errno_of(fs::remove_file(m.p(path)));
                assert_eq!(got, Ok(()), "unlink {path} of a directory cleared");
                model.remove(path);
                let left = fs::symlink_metadata(m.p(path)).map(|_| ());
                assert_eq!(errno_of(left), Err(libc::ENOENT), "{path} after its unlink");
            }
            return format!("clear {dir:?} ({} removed)", gone.len());
        }
        96..=97 => {
            // the other mount lists the directory now: a lease this mount
            // holds on it is asked for and given up first, so the listing
            // shows every unlink answered here (names only: the other
            // mount's kernel may keep attributes until it reads the log)
            let same_dir = match (fs::metadata(m.p(&dir)), fs::metadata(other.p(&dir))) {
                (Ok(here), Ok(there)) => here.ino() == there.ino(),
                _ => false,
            };
            if !same_dir {
                return format!("peek {dir:?} (the other mount's kernel resolves it elsewhere)");
            }
            let there: BTreeSet<String> = fs::read_dir(other.p(&dir))
                .unwrap_or_else(|e| panic!("readdir {dir:?} on the other mount: {e}"))
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| !(n.starts_with(".jfs") || dir.is_empty() && n == ".trash"))
                .collect();
            assert_eq!(
                there,
                model.children(&dir),
                "names of {dir:?} on the other mount"
            );
            return format!("peek {dir:?}");
        }
        _ => {
            // the kernel forgets names and inodes not in use: what it asks
            // next, the mount answers from its own caches
            fs::write("/proc/sys/vm/drop_caches", "2").expect("dropping the kernel's caches");
            return "drop the kernel's caches".into();
        }
    };
    assert_eq!(got, want, "{what} {path}");
    format!("{what} {path}: {got:?}")
}

/// `got` (lstat of `path` on `m`) agrees with the model's node.
fn check_node(
    model: &Model,
    m: &Mount,
    path: &str,
    want: &Option<Node>,
    got: Option<&fs::Metadata>,
) {
    let Some(node) = want else {
        assert!(
            got.is_none(),
            "{path}: exists on {}, missing in the model",
            m.path.display()
        );
        return;
    };
    let Some(st) = got else {
        panic!(
            "{path}: missing on {}, a {node:?} in the model",
            m.path.display()
        );
    };
    match node {
        Node::Dir => {
            assert!(st.is_dir(), "{path}: not a directory");
            assert_eq!(st.nlink(), model.dir_nlink(path), "{path}: nlink");
        }
        Node::Symlink(target) => {
            assert!(st.file_type().is_symlink(), "{path}: not a symlink");
            let t = fs::read_link(m.p(path)).unwrap();
            assert_eq!(t.to_str(), Some(target.as_str()), "{path}: symlink target");
        }
        Node::File(ino) => {
            assert!(st.is_file(), "{path}: not a file");
            let data = &model.data[ino];
            assert_eq!(st.len(), data.len() as u64, "{path}: size");
            assert_eq!(st.nlink(), model.nlink(*ino), "{path}: nlink");
            assert_eq!(st.mode() & 0o7777, model.modes[ino], "{path}: mode");
            assert_eq!(&fs::read(m.p(path)).unwrap(), data, "{path}: bytes");
        }
    }
}

/// A directory's names on `m` are the model's, and each missing name is missing.
fn check_dir(model: &Model, m: &Mount, dir: &str) {
    let on_mount: BTreeSet<String> = fs::read_dir(m.p(dir))
        .unwrap_or_else(|e| panic!("readdir {dir:?} on {}: {e}", m.path.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        // (the control file, and the trash where there is one)
        .filter(|n| !(n.starts_with(".jfs") || dir.is_empty() && n == ".trash"))
        .collect();
    assert_eq!(
        on_mount,
        model.children(dir),
        "names of {dir:?} on {}",
        m.path.display()
    );
    for name in NAMES {
        let path = join(dir, name);
        if !model.nodes.contains_key(&path) {
            assert!(
                fs::symlink_metadata(m.p(&path)).is_err(),
                "{path}: missing in the model, exists on {}",
                m.path.display()
            );
        }
    }
}

/// The whole tree on `m` is the model, hard links sharing inode numbers:
/// every name of every directory looked up first (what the mount answers
/// from its caches), then every directory read.
fn check_all(model: &Model, m: &Mount) {
    let mut inos: HashMap<u64, u64> = HashMap::new();
    let dirs = model.dirs();
    for dir in &dirs {
        for name in NAMES {
            let path = join(dir, name);
            let st = fs::symlink_metadata(m.p(&path)).ok();
            let node = model.nodes.get(&path).cloned();
            check_node(model, m, &path, &node, st.as_ref());
            if let (Some(Node::File(ino)), Some(st)) = (node, st) {
                let seen = *inos.entry(ino).or_insert(st.ino());
                assert_eq!(seen, st.ino(), "{path}: a hard link with another inode");
            }
        }
    }
    for dir in &dirs {
        check_dir(model, m, dir);
    }
}

/// `ops` random operations from `seed` on `mounts` of a volume whose root
/// holds shard roots `shard_roots` (none: a volume without shards).
fn run(seed: u64, ops: usize, mounts: &[&Mount], shard_roots: &[(&str, u16)]) {
    let mut rng = Rng::new(seed);
    let mut model = Model::new(shard_roots);
    let mut last: VecDeque<String> = VecDeque::new();
    let mut on = 0;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for i in 0..ops {
            if i > 0 && i % PHASE == 0 {
                std::thread::sleep(SETTLE);
                for m in mounts {
                    check_all(&model, m);
                }
                on = rng.index(mounts.len());
                last.push_back(format!("-- now on mount {on}"));
            }
            let other = mounts[(on + 1) % mounts.len()];
            let did = step(&mut rng, &mut model, mounts[on], other);
            last.push_back(format!("{i}: {did}"));
            if last.len() > 30 {
                last.pop_front();
            }
        }
        std::thread::sleep(SETTLE);
        for m in mounts {
            check_all(&model, m);
        }
    }));
    if let Err(e) = result {
        eprintln!("seed {seed}: failed; the last ops:");
        for l in &last {
            eprintln!("  {l}");
        }
        std::panic::resume_unwind(e);
    }
}

fn ops() -> usize {
    std::env::var("JFS_NS_MODEL_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000)
}

fn seed() -> u64 {
    std::env::var("JFS_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

#[test]
fn random_namespace_ops_on_two_mounts_match_the_model() {
    let v = Volume::new("ns-model");
    let a = v.mount("a", &CACHED);
    let b = v.mount("b", &CACHED);
    let seed = seed();
    eprintln!("seed {seed}");
    run(seed, ops(), &[&a, &b], &[]);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
    // (creates committed together: answered under a lease)
    let batched = v.sql(
        "SELECT count(*) FROM (SELECT xid FROM jfs.change WHERE op = 'create' \
         GROUP BY xid HAVING count(*) > 1) batches",
    );
    assert_ne!(batched, "0", "no creates were answered under a lease");
}

/// With a trash, removals make /.trash and its hours on the mount's behalf
/// (a name this mount did not make itself, in a directory it lists).
#[test]
fn random_namespace_ops_with_a_trash_match_the_model() {
    let v = Volume::with_options("ns-model-trash", &["--trash-days", "1"]);
    let a = v.mount("a", &CACHED);
    let b = v.mount("b", &CACHED);
    let seed = seed();
    eprintln!("seed {seed}");
    run(seed, ops() / 4, &[&a, &b], &[]);
    assert!(
        fs::read_dir(a.p(".trash")).unwrap().count() > 0,
        "removals went to the trash"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// Over three databases: the root's, shard 1 holding /s1 and shard 2
/// holding /s2 (names the run never picks, so they stay: it works in and
/// across them). A file or directory is made on its parent's shard; what
/// would cross shards (a rename or link between them) answers EXDEV, and
/// everything else as on one database.
#[test]
fn random_namespace_ops_across_shards_match_the_model() {
    let v = ShardedVolume::new("ns-model-shards", 2, &[("/s1", 1), ("/s2", 2)]);
    let a = v.mount("a", &CACHED);
    let b = v.mount("b", &CACHED);
    let seed = seed();
    eprintln!("seed {seed}");
    run(seed, ops() / 4, &[&a, &b], &[("s1", 1), ("s2", 2)]);
    drop((a, b));
    v.assert_whole();
    let made = v.sql_each("SELECT count(*) FROM jfs.node WHERE inode < (32767::bigint << 48)");
    assert!(
        made.iter().all(|n| n.parse::<u64>().unwrap() > 1),
        "every shard holds nodes of the run: {made:?}"
    );
}
