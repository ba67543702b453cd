//! Long random-op runs against an in-memory model: pwrite, ftruncate, pread,
//! fallocate (grow, punch a hole, zero a range), copy_file_range within the
//! file, SEEK_DATA/SEEK_HOLE, fchmod and futimens (which a mount with
//! writes pending makes with their commit), fsync and close/reopen on real
//! mounts, every read compared with what the file must hold, every fstat
//! with its mode and mtime. A failure prints the seed, the op number and the
//! last ops; `JFS_MODEL_SEED=N` reruns one seed, `JFS_MODEL_OPS=N` sets the
//! length of a run.
use std::fs::{File, FileTimes, Metadata, OpenOptions, Permissions};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use jfs_e2e::{Rng, Volume};
use rustix::fs::FallocateFlags;

/// Where in a file the ops land: `base` plus up to `span` bytes, so a run
/// can sit across a 4 MiB block or a 64 MiB chunk boundary.
#[derive(Clone, Copy)]
struct Window {
    base: u64,
    span: u64,
    max_write: u64,
}

/// What the file must hold: its bytes from `base` (everything before `base`
/// is zeros once the file is longer), and its length.
struct Model {
    window: Window,
    len: u64,
    bytes: Vec<u8>,
    /// Its permission bits.
    mode: u32,
    mtime: Mtime,
}

/// What the file's mtime must be.
#[derive(Clone, Copy, Debug)]
enum Mtime {
    /// Any (a change of the data may or may not have moved it).
    Unknown,
    /// Set by futimens to this (ns since the epoch).
    Set(i64),
    /// Set to this, then written: once committed, later than it.
    WrittenAfter(i64),
}

impl Model {
    fn new(window: Window, mode: u32) -> Model {
        Model {
            window,
            len: 0,
            bytes: Vec::new(),
            mode,
            mtime: Mtime::Unknown,
        }
    }

    /// A pwrite: a set mtime is left behind once it is committed.
    fn written(&mut self) {
        if let Mtime::Set(t) = self.mtime {
            self.mtime = Mtime::WrittenAfter(t);
        }
    }

    /// Compares `meta` (fstat of the file) with the mode and mtime;
    /// `committed`: no write of the file is pending (a write's mtime is
    /// its commit's).
    fn check_attrs(&self, meta: &Metadata, committed: bool, trail: &Trail, op: usize, who: &str) {
        let mode = meta.mode() & 0o7777;
        if mode != self.mode {
            trail.fail(op, format!("{who}: mode {mode:o}, want {:o}", self.mode));
        }
        let ns = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
        let fine = match self.mtime {
            Mtime::Unknown => true,
            Mtime::Set(t) => ns == t,
            Mtime::WrittenAfter(t) if committed => ns > t,
            Mtime::WrittenAfter(t) => ns >= t,
        };
        if !fine {
            trail.fail(op, format!("{who}: mtime {ns}, want {:?}", self.mtime));
        }
    }

    fn ensure(&mut self, end: u64) {
        let need = end.saturating_sub(self.window.base) as usize;
        if self.bytes.len() < need {
            self.bytes.resize(need, 0);
        }
    }

    fn write(&mut self, off: u64, data: &[u8]) {
        let end = off + data.len() as u64;
        self.ensure(end);
        let at = (off - self.window.base) as usize;
        self.bytes[at..at + data.len()].copy_from_slice(data);
        self.len = self.len.max(end);
    }

    /// Bytes [from, to) read as zeros from now on (the length stays).
    fn zero(&mut self, from: u64, to: u64) {
        if to > from {
            self.write(from, &vec![0; (to - from) as usize]);
        }
    }

    fn truncate(&mut self, len: u64) {
        if len < self.len {
            let keep = len.saturating_sub(self.window.base) as usize;
            if self.bytes.len() > keep {
                self.bytes.truncate(keep);
            }
        }
        self.len = len;
        self.ensure(len);
    }

    /// The bytes a read of `len` at `off` must return (short at EOF).
    fn read(&self, off: u64, len: u64) -> Vec<u8> {
        let end = (off + len).min(self.len);
        if off >= end {
            return Vec::new();
        }
        let mut out = vec![0u8; (end - off) as usize];
        let base = self.window.base;
        for (i, b) in out.iter_mut().enumerate() {
            let at = off + i as u64;
            if at >= base {
                *b = self.bytes.get((at - base) as usize).copied().unwrap_or(0);
            }
        }
        out
    }
}

/// One run's description of what happened, for the failure message.
struct Trail {
    seed: u64,
    recent: std::collections::VecDeque<String>,
}

impl Trail {
    fn note(&mut self, op: usize, what: String) {
        if self.recent.len() == 40 {
            self.recent.pop_front();
        }
        self.recent.push_back(format!("{op:>7} {what}"));
    }

    fn fail(&self, op: usize, why: String) -> ! {
        let recent: Vec<&str> = self.recent.iter().map(String::as_str).collect();
        panic!(
            "seed {} failed at op {op}: {why}\nlast ops:\n{}\nrerun with JFS_MODEL_SEED={}",
            self.seed,
            recent.join("\n"),
            self.seed
        );
    }
}

fn open_rw(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// First byte where two buffers differ.
fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

/// Compares a read of [off, off+len) of `f` with the model.
fn check_read(f: &File, model: &Model, off: u64, len: u64, trail: &Trail, op: usize) {
    let mut got = vec![0u8; len as usize];
    let mut n = 0;
    while n < got.len() {
        match f.read_at(&mut got[n..], off + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => trail.fail(op, format!("pread [{off:#x}, +{len:#x}): {e}")),
        }
    }
    got.truncate(n);
    let want = model.read(off, len);
    if got != want {
        let at = first_difference(&got, &want);
        let last = got
            .iter()
            .zip(&want)
            .rposition(|(x, y)| x != y)
            .unwrap_or(at);
        trail.fail(
            op,
            format!(
                "pread [{off:#x}, +{len:#x}) of a file of {:#x}: got {} bytes, want {}; bytes \
                 differ from {:#x} to {:#x} (first got {:?}, want {:?})",
                model.len,
                got.len(),
                want.len(),
                off + at as u64,
                off + last as u64,
                got.get(at..(at + 8).min(got.len())),
                want.get(at..(at + 8).min(want.len())),
            ),
        );
    }
}

/// SEEK_DATA and SEEK_HOLE from `off`: past the end both are ENXIO; else
/// the model holds zeros from `off` up to the data found (to the end when
/// there is none), and the hole found is within the file and reads zeros.
fn check_seeks(f: &File, model: &Model, off: u64, trail: &Trail, op: usize) {
    use rustix::fs::{seek, SeekFrom};
    let data = seek(f, SeekFrom::Data(off));
    let hole = seek(f, SeekFrom::Hole(off));
    if off >= model.len {
        if data != Err(rustix::io::Errno::NXIO) || hole != Err(rustix::io::Errno::NXIO) {
            trail.fail(
                op,
                format!(
                    "past the end ({:#x}): SEEK_DATA {data:?}, SEEK_HOLE {hole:?}",
                    model.len
                ),
            );
        }
        return;
    }
    let data_at = match data {
        Ok(at) => at,
        Err(rustix::io::Errno::NXIO) => model.len,
        Err(e) => trail.fail(op, format!("SEEK_DATA: {e}")),
    };
    let skipped = model.read(off, data_at.saturating_sub(off));
    if data_at < off || data_at > model.len || skipped.iter().any(|&b| b != 0) {
        trail.fail(
            op,
            format!("SEEK_DATA from {off:#x} gave {data_at:#x}, over bytes that are not zeros"),
        );
    }
    match hole {
        Ok(at) if at >= off && at <= model.len => {
            if model.read(at, 1).iter().any(|&b| b != 0) {
                trail.fail(
                    op,
                    format!("SEEK_HOLE from {off:#x} gave {at:#x}, which holds data"),
                );
            }
        }
        other => trail.fail(op, format!("SEEK_HOLE from {off:#x}: {other:?}")),
    }
}

/// Runs `ops` random ops with `seed` on `path` through two descriptors
/// (each op picks one; one is closed and reopened now and then), reading
/// back through `reader_path` on close when given (the same file through
/// another mount).
fn run(path: &Path, reader_path: Option<&Path>, window: Window, seed: u64, ops: usize) {
    let mut rng = Rng::new(seed);
    let mut trail = Trail {
        seed,
        recent: Default::default(),
    };
    let mut fds = vec![open_rw(path), open_rw(path)];
    fds[0].set_len(0).unwrap();
    let mode = fds[0].metadata().unwrap().mode() & 0o7777;
    let mut model = Model::new(window, mode);
    let mut stamp = 0u8;
    for op in 0..ops {
        let which = rng.below(2) as usize;
        let f = &fds[which];
        let pick = rng.below(100);
        let off = window.base + rng.below(window.span);
        match pick {
            // pwrite of 1 B .. max_write
            0..=39 => {
                let len = 1 + rng.below(window.max_write);
                stamp = stamp.wrapping_add(1).max(1);
                let data: Vec<u8> = (0..len)
                    .map(|i| stamp ^ (i as u8).wrapping_mul(31) ^ ((op as u8) << 3))
                    .collect();
                trail.note(op, format!("fd{which} pwrite [{off:#x}, {:#x})", off + len));
                if let Err(e) = f.write_all_at(&data, off) {
                    trail.fail(op, format!("pwrite: {e}"));
                }
                model.write(off, &data);
                model.written();
            }
            // fchmod (the owner keeps read and write)
            40..=41 => {
                let mode = [0o600, 0o640, 0o644, 0o700, 0o750, 0o755, 0o1644][rng.index(7)];
                trail.note(op, format!("fd{which} fchmod {mode:o}"));
                if let Err(e) = f.set_permissions(Permissions::from_mode(mode)) {
                    trail.fail(op, format!("fchmod: {e}"));
                }
                model.mode = mode;
            }
            // futimens of the mtime, to a time in 2001 (before any write's)
            42..=43 => {
                let ns = 978_307_200_000_000_000 + op as i64 * 1_000_000_007;
                trail.note(op, format!("fd{which} futimens mtime {ns}"));
                let at = UNIX_EPOCH + Duration::from_nanos(ns as u64);
                if let Err(e) = f.set_times(FileTimes::new().set_modified(at)) {
                    trail.fail(op, format!("futimens: {e}"));
                }
                model.mtime = Mtime::Set(ns);
            }
            // pread and compare
            44..=67 => {
                let len = 1 + rng.below(window.max_write * 2);
                trail.note(op, format!("fd{which} pread [{off:#x}, {:#x})", off + len));
                check_read(f, &model, off, len, &trail, op);
            }
            // ftruncate to anywhere in the window (down or up)
            68..=76 => {
                model.mtime = Mtime::Unknown;
                trail.note(
                    op,
                    format!("fd{which} ftruncate {:#x} -> {off:#x}", model.len),
                );
                if let Err(e) = f.set_len(off) {
                    trail.fail(op, format!("ftruncate: {e}"));
                }
                model.truncate(off);
            }
            // fallocate: mode 0 grows the file, KEEP_SIZE leaves the length
            77..=80 => {
                model.mtime = Mtime::Unknown;
                let len = 1 + rng.below(window.max_write);
                let keep = rng.below(2) == 0;
                let flags = if keep {
                    FallocateFlags::KEEP_SIZE
                } else {
                    FallocateFlags::empty()
                };
                trail.note(
                    op,
                    format!(
                        "fd{which} fallocate{} [{off:#x}, {:#x})",
                        if keep { " keep_size" } else { "" },
                        off + len
                    ),
                );
                if let Err(e) = rustix::fs::fallocate(f, flags, off, len) {
                    trail.fail(op, format!("fallocate: {e}"));
                }
                if !keep && off + len > model.len {
                    model.truncate(off + len);
                }
            }
            // punch a hole (KEEP_SIZE), or zero a range (with or without it)
            81..=84 => {
                model.mtime = Mtime::Unknown;
                let len = 1 + rng.below(window.max_write);
                let (flags, what) = match rng.below(3) {
                    0 => (
                        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
                        "punch_hole",
                    ),
                    1 => (
                        FallocateFlags::ZERO_RANGE | FallocateFlags::KEEP_SIZE,
                        "zero_range keep_size",
                    ),
                    _ => (FallocateFlags::ZERO_RANGE, "zero_range"),
                };
                trail.note(op, format!("fd{which} {what} [{off:#x}, {:#x})", off + len));
                if let Err(e) = rustix::fs::fallocate(f, flags, off, len) {
                    trail.fail(op, format!("{what}: {e}"));
                }
                if flags.contains(FallocateFlags::KEEP_SIZE) {
                    model.zero(off, (off + len).min(model.len));
                } else {
                    model.zero(off, off + len);
                }
            }
            // copy_file_range from elsewhere in the file (ranges apart;
            // short at the end of the file)
            85..=87 => {
                model.mtime = Mtime::Unknown;
                let to = window.base + rng.below(window.span);
                let want = (1 + rng.below(window.max_write)).min(model.len.saturating_sub(off));
                if want > 0 && to < off + want && off < to + want {
                    continue; // overlapping ranges of one file are EINVAL
                }
                let from_fd = &fds[rng.below(2) as usize];
                trail.note(
                    op,
                    format!("fd{which} copy_file_range [{off:#x}, +{want:#x}) to {to:#x}"),
                );
                let (mut src, mut dst) = (off, to);
                match rustix::fs::copy_file_range(
                    from_fd,
                    Some(&mut src),
                    f,
                    Some(&mut dst),
                    want as usize,
                ) {
                    Ok(0) if want == 0 => {}
                    Ok(n) if n as u64 == want => {
                        let data = model.read(off, want);
                        model.write(to, &data);
                    }
                    Ok(n) => {
                        trail.fail(op, format!("copy_file_range copied {n:#x}, want {want:#x}"))
                    }
                    Err(e) => trail.fail(op, format!("copy_file_range: {e}")),
                }
            }
            // SEEK_DATA / SEEK_HOLE: what they skip reads as zeros
            88..=89 => {
                trail.note(op, format!("fd{which} seek_data, seek_hole from {off:#x}"));
                check_seeks(f, &model, off, &trail, op);
            }
            // the length, as stat says it
            90..=93 => {
                trail.note(op, format!("fd{which} fstat"));
                let meta = f.metadata().unwrap();
                let len = meta.len();
                if len != model.len {
                    trail.fail(
                        op,
                        format!("fstat says length {len:#x}, want {:#x}", model.len),
                    );
                }
                model.check_attrs(&meta, false, &trail, op, "fstat");
            }
            94..=96 => {
                trail.note(op, format!("fd{which} fsync"));
                if let Err(e) = f.sync_all() {
                    trail.fail(op, format!("fsync: {e}"));
                }
            }
            // close and open again (close-to-open), the whole file checked
            _ => {
                trail.note(op, format!("fd{which} close, reopen, read all"));
                drop(fds.remove(which));
                if let Some(other) = reader_path {
                    let g = File::open(other).unwrap();
                    let meta = g.metadata().unwrap();
                    model.check_attrs(&meta, true, &trail, op, "the other mount");
                    if meta.len() != model.len {
                        trail.fail(
                            op,
                            format!(
                                "the other mount sees length {:#x}, want {:#x}",
                                g.metadata().unwrap().len(),
                                model.len
                            ),
                        );
                    }
                    check_read(
                        &g,
                        &model,
                        window.base,
                        window.span + window.max_write,
                        &trail,
                        op,
                    );
                }
                fds.insert(which, open_rw(path));
                let meta = fds[which].metadata().unwrap();
                model.check_attrs(&meta, true, &trail, op, "reopened");
                check_read(
                    &fds[which],
                    &model,
                    window.base,
                    window.span + window.max_write,
                    &trail,
                    op,
                );
            }
        }
    }
    drop(fds);
    let f = File::open(path).unwrap();
    check_read(&f, &model, 0, model.len, &trail, ops);
}

fn ops_per_run(default: usize) -> usize {
    std::env::var("JFS_MODEL_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The fixed seeds, plus one new seed each run (printed), or only
/// JFS_MODEL_SEED when it is set.
fn seeds(fixed: &[u64]) -> Vec<u64> {
    if let Some(seed) = std::env::var("JFS_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return vec![seed];
    }
    let fresh = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        % 1_000_000_007;
    eprintln!("random seed of this run: {fresh} (JFS_MODEL_SEED={fresh} reruns it)");
    let mut out = fixed.to_vec();
    out.push(fresh);
    out
}

const SMALL: Window = Window {
    base: 0,
    span: 256 << 10,
    max_write: 64 << 10,
};

/// Across the first 4 MiB block boundary.
const ACROSS_BLOCK: Window = Window {
    base: (4 << 20) - (128 << 10),
    span: 256 << 10,
    max_write: 64 << 10,
};

/// Across the first 64 MiB chunk boundary.
const ACROSS_CHUNK: Window = Window {
    base: (64 << 20) - (128 << 10),
    span: 256 << 10,
    max_write: 64 << 10,
};

#[test]
fn random_ops_on_one_file_match_the_model() {
    let v = Volume::new("model-one");
    let m = v.mount("a", &[]);
    let ops = ops_per_run(40_000);
    for (i, seed) in seeds(&[1, 2, 3]).into_iter().enumerate() {
        let window = [SMALL, ACROSS_BLOCK, ACROSS_CHUNK, SMALL][i % 4];
        let path = m.p(&format!("file-{seed}"));
        run(&path, None, window, seed, ops);
        assert_eq!(
            v.sql("SELECT count(*) FROM jfs.fsck()"),
            "0",
            "fsck after seed {seed}"
        );
    }
}

#[test]
fn random_ops_on_one_mount_read_back_on_another() {
    let v = Volume::new("model-two");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    let ops = ops_per_run(20_000);
    for seed in seeds(&[11]) {
        let name = format!("shared-{seed}");
        run(&a.p(&name), Some(&b.p(&name)), SMALL, seed, ops);
        assert_eq!(
            v.sql("SELECT count(*) FROM jfs.fsck()"),
            "0",
            "fsck after seed {seed}"
        );
    }
}

/// Around 32 KiB, the threshold of files kept in the database below.
const AROUND_INLINE: Window = Window {
    base: 0,
    span: 64 << 10,
    max_write: 16 << 10,
};

/// Small files kept in the database (`--inline-max 32`): the file crosses
/// the threshold both ways all the time, its chunk holds slices of both
/// kinds, and another mount reads what the first wrote.
#[test]
fn random_ops_across_the_inline_threshold_match_the_model() {
    let v = Volume::with_options("model-inline", &["--inline-max", "32"]);
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    let ops = ops_per_run(20_000);
    for seed in seeds(&[21]) {
        let name = format!("inline-{seed}");
        run(&a.p(&name), Some(&b.p(&name)), AROUND_INLINE, seed, ops);
        let kept = v.slices_ever_kept(10);
        assert!(kept >= 10, "only {kept} slices were kept in the database");
        assert_eq!(
            v.sql("SELECT count(*) FROM jfs.fsck()"),
            "0",
            "fsck after seed {seed}"
        );
    }
}
