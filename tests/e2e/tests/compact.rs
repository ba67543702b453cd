//! Compaction: chunks written in many small pieces are rewritten as one slice,
//! in the background and by `jfs compact`, without changing a byte, also for
//! a reader on another mount that still holds the old slice list.
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use jfs_e2e::{eventually, jfs, ok, pattern, Volume};

const CHUNK: u64 = 64 << 20;

/// Writes `count` small pieces into `f` (each committed by fsync, so each is
/// a slice), at offsets from `base` spread over `span`; keeps `model` (the
/// bytes from `base`) up to date.
fn scribble(f: &File, model: &mut Vec<u8>, base: u64, span: u64, count: usize, seed: u64) {
    let noise = pattern(seed, count * 64);
    for i in 0..count {
        let at = (noise[i * 64] as u64 * 65_537 + noise[i * 64 + 1] as u64 * 257 + i as u64 * 4099)
            % (span - 64);
        let piece = &noise[i * 64..i * 64 + 1 + (noise[i * 64 + 2] % 63) as usize];
        f.write_all_at(piece, base + at).unwrap();
        f.sync_all().unwrap();
        let end = at as usize + piece.len();
        if model.len() < end {
            model.resize(end, 0);
        }
        model[at as usize..end].copy_from_slice(piece);
    }
}

fn create_rw(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

fn read_range(path: &Path, off: u64, len: usize) -> Vec<u8> {
    let f = File::open(path).unwrap();
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, off).unwrap();
    buf
}

fn most_slices(v: &Volume) -> i64 {
    v.sql("SELECT coalesce(max(slices), 0) FROM jfs.fragmentation")
        .parse()
        .unwrap()
}

#[test]
fn a_chunk_rewritten_in_small_pieces_is_compacted_in_the_background() {
    let v = Volume::new("compact-bg");
    let m = v.mount("a", &[]);
    let path = m.p("db");
    let f = create_rw(&path);
    let mut model = Vec::new();
    scribble(&f, &mut model, 0, 1 << 20, 1_000, 7);
    drop(f);
    // at most about COMPACT_AT (100) slices stay between two compactions
    assert!(
        eventually(30, || most_slices(&v) < 110),
        "still {} slices in a chunk",
        most_slices(&v)
    );
    assert!(fs::read(&path).unwrap() == model);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
    // the replaced slices' objects go (gc delay 0, interval 1 s)
    assert!(eventually(30, || v
        .sql("SELECT count(*) FROM jfs.delslice")
        == "0"));
    assert!(fs::read(&path).unwrap() == model);
}

#[test]
fn jfs_compact_leaves_one_slice_per_chunk_and_the_same_bytes() {
    let v = Volume::new("compact-cli");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    fs::create_dir(a.p("tree")).unwrap();
    let path = a.p("tree/two-chunks");
    let f = create_rw(&path);
    // fewer slices than a background compaction waits for, in two chunks,
    // the second one across its first block boundary
    let mut first = Vec::new();
    scribble(&f, &mut first, 0, 3 << 20, 60, 1);
    let mut second = Vec::new();
    scribble(&f, &mut second, CHUNK + (4 << 20) - 4096, 8192, 60, 2);
    drop(f);
    assert!(most_slices(&v) >= 40, "the test file is not fragmented");

    // a reader on the other mount keeps the old slice lists of both chunks
    let off = CHUNK + (4 << 20) - 4096;
    let held = File::open(b.p("tree/two-chunks")).unwrap();
    let mut buf = vec![0u8; first.len()];
    held.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf == first);
    let mut buf = vec![0u8; second.len()];
    held.read_exact_at(&mut buf, off).unwrap();
    assert!(buf == second);

    let out = ok(jfs().arg("compact").arg(a.p("tree")));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("2 chunks compacted"), "{said}");
    assert_eq!(
        v.sql("SELECT string_agg(slices::text, ',' ORDER BY chunk_index) FROM jfs.fragmentation"),
        "1,1"
    );
    assert!(read_range(&path, 0, first.len()) == first);
    assert!(read_range(&path, off, second.len()) == second);
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        off + second.len() as u64
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");

    // the old objects are deleted; the reader on b, its page cache dropped,
    // still reads the right bytes
    assert!(eventually(30, || v
        .sql("SELECT count(*) FROM jfs.delslice")
        == "0"));
    fs::write("/proc/sys/vm/drop_caches", "1").unwrap();
    let mut buf = vec![0u8; second.len()];
    held.read_exact_at(&mut buf, off).unwrap();
    assert!(buf == second, "the other mount read stale slices");
    assert!(
        b.log_text().contains("fresh slice lists"),
        "the other mount did not use its old slice list (the test proved nothing)"
    );
    // nothing left to do
    let out = ok(jfs().arg("compact").arg(a.p("tree")));
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 chunks compacted"));
}
