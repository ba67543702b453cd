//! Byte ranges on real mounts with real tools: `cp` copies by
//! copy_file_range, which jfs answers with shared slices (no bytes moved,
//! the copy and its source kept apart by later writes); `fallocate
//! --punch-hole` / `--zero-range` free and zero ranges, SEEK_DATA and
//! SEEK_HOLE find them, on this mount and on another.
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::Command;

use jfs_e2e::{eventually, ok, pattern, Volume};
use rustix::fs::{seek, SeekFrom};

const MIB: u64 = 1 << 20;

fn write_file(path: &Path, data: &[u8]) {
    let f = File::create(path).unwrap();
    f.write_all_at(data, 0).unwrap();
    f.sync_all().unwrap();
}

fn read_all(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The slice ids a file's rows name (holes left out), sorted.
fn slice_ids(v: &Volume, path: &str) -> String {
    v.sql(&format!(
        "SELECT string_agg(DISTINCT slice_id::text, ',' ORDER BY slice_id::text) FROM jfs.slice \
         WHERE inode = jfs.resolve('{path}') AND slice_id <> 0"
    ))
}

#[test]
fn cp_shares_the_slices_and_later_writes_keep_the_files_apart() {
    let v = Volume::new("ranges-cp");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    // 70 MiB + a bit: past the first chunk, not block aligned
    let len = 70 * MIB as usize + 12345;
    let data = pattern(7, len);
    write_file(&a.p("big"), &data);
    ok(Command::new("cp").arg(a.p("big")).arg(a.p("copy")));
    assert!(
        read_all(&a.p("copy")) == data,
        "the copy reads as its source"
    );
    let ids = slice_ids(&v, "/big");
    assert!(!ids.is_empty());
    assert_eq!(
        slice_ids(&v, "/copy"),
        ids,
        "the copy names the source's slices"
    );
    assert_eq!(
        v.sql(&format!(
            "SELECT DISTINCT refs FROM jfs.slice_ref WHERE slice_id IN ({ids})"
        )),
        "2",
        "one reference from each file"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");

    // a write into the copy leaves the source alone, and the other way round
    let copy = OpenOptions::new().write(true).open(a.p("copy")).unwrap();
    copy.write_all_at(&[0xAA; 5000], 3 * MIB - 100).unwrap();
    drop(copy);
    let big = OpenOptions::new().write(true).open(a.p("big")).unwrap();
    big.write_all_at(&[0x55; 100], 65 * MIB).unwrap();
    drop(big);
    let mut want_copy = data.clone();
    want_copy[3 * MIB as usize - 100..3 * MIB as usize + 4900].fill(0xAA);
    let mut want_big = data.clone();
    want_big[65 * MIB as usize..65 * MIB as usize + 100].fill(0x55);
    for m in [&a, &b] {
        assert!(
            read_all(&m.p("copy")) == want_copy,
            "copy on {}",
            m.path.display()
        );
        assert!(
            read_all(&m.p("big")) == want_big,
            "source on {}",
            m.path.display()
        );
    }
    // a copy into the middle of an existing file, from another mount
    ok(Command::new("python3").arg("-c").arg(format!(
        "import os\n\
         s = os.open('{}', os.O_RDONLY)\n\
         d = os.open('{}', os.O_WRONLY)\n\
         n = os.copy_file_range(s, d, 1000000, 10, 2000000)\n\
         assert n == 1000000, n",
        b.p("big").display(),
        b.p("copy").display()
    )));
    want_copy[2_000_000..3_000_000].copy_from_slice(&want_big[10..1_000_010]);
    assert!(
        read_all(&a.p("copy")) == want_copy,
        "a range copied on B, read on A"
    );

    // the source goes: the copy keeps its bytes; fsck is clean all along
    std::fs::remove_file(a.p("big")).unwrap();
    drop(a);
    drop(b);
    let a = v.mount("a2", &[]);
    assert!(read_all(&a.p("copy")) == want_copy);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn punched_holes_read_as_zeros_on_both_mounts_and_seek_finds_them() {
    let v = Volume::new("ranges-punch");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    // three slices of 1 MiB each (one commit each), then 1 MiB more
    let data = pattern(3, 4 * MIB as usize);
    let f = File::create(a.p("f")).unwrap();
    for i in 0..4 {
        let at = (i * MIB) as usize;
        f.write_all_at(&data[at..at + MIB as usize], i * MIB)
            .unwrap();
        f.sync_all().unwrap();
    }
    drop(f);
    let slices_before: u64 = v.sql("SELECT count(*) FROM jfs.slice_ref").parse().unwrap();
    // punch the second MiB (a whole slice: it is freed) and part of the fourth
    ok(Command::new("fallocate")
        .args(["--punch-hole", "--offset", "1048576", "--length", "1048576"])
        .arg(a.p("f")));
    ok(Command::new("fallocate")
        .args(["--punch-hole", "--offset", "3500000", "--length", "100000"])
        .arg(a.p("f")));
    let mut want = data.clone();
    want[MIB as usize..2 * MIB as usize].fill(0);
    want[3_500_000..3_600_000].fill(0);
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.slice_ref")
            .parse::<u64>()
            .unwrap(),
        slices_before - 1,
        "the slice wholly inside the hole lost its last reference"
    );
    assert!(
        eventually(10, || read_all(&b.p("f")) == want),
        "B reads the holes"
    );
    assert!(read_all(&a.p("f")) == want);
    for m in [&a, &b] {
        let f = File::open(m.p("f")).unwrap();
        assert_eq!(seek(&f, SeekFrom::Hole(0)), Ok(MIB), "first hole");
        assert_eq!(seek(&f, SeekFrom::Data(MIB)), Ok(2 * MIB), "data after it");
        assert_eq!(seek(&f, SeekFrom::Hole(2 * MIB)), Ok(3_500_000));
        assert_eq!(seek(&f, SeekFrom::Data(3_500_000)), Ok(3_600_000));
        assert_eq!(seek(&f, SeekFrom::Hole(3_600_000)), Ok(4 * MIB), "the end");
        assert_eq!(
            seek(&f, SeekFrom::Data(4 * MIB)),
            Err(rustix::io::Errno::NXIO)
        );
    }
    // st_blocks counts what the slices show: 4 MiB less the holes
    for m in [&a, &b] {
        let blocks = std::fs::metadata(m.p("f")).unwrap().blocks();
        assert_eq!(
            blocks,
            (4 * MIB - MIB - 100_000).div_ceil(4096) * 8,
            "st_blocks on {}",
            m.path.display()
        );
    }
    // zero a range past the end without KEEP_SIZE: the file grows, with zeros
    ok(Command::new("fallocate")
        .args(["--zero-range", "--offset", "4000000", "--length", "1000000"])
        .arg(a.p("f")));
    want[4_000_000..].fill(0);
    want.resize(5_000_000, 0);
    assert!(read_all(&a.p("f")) == want);
    assert!(
        eventually(10, || read_all(&b.p("f")) == want),
        "B sees the zeroed range"
    );
    // what Linux does not have, jfs refuses too: collapse and insert
    let out = Command::new("fallocate")
        .args(["--collapse-range", "--offset", "0", "--length", "4096"])
        .arg(a.p("f"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not supported"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn du_of_a_sparse_file_counts_its_data_not_its_length() {
    let v = Volume::new("ranges-du");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    let sparse = a.p("sparse");
    ok(Command::new("truncate").args(["-s", "200M"]).arg(&sparse));
    let f = OpenOptions::new().write(true).open(&sparse).unwrap();
    f.write_all_at(&[1u8; 4096], 100 * MIB).unwrap();
    f.write_all_at(&[2u8; 100], 150 * MIB).unwrap();
    assert_eq!(std::fs::metadata(&sparse).unwrap().len(), 200 * MIB);
    f.sync_all().unwrap();
    drop(f);
    for m in [&a, &b] {
        let out = ok(Command::new("du").args(["-k"]).arg(m.p("sparse")));
        let kib: u64 = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(kib, 8, "du -k of a 200 MiB file holding 4 KiB + 100 bytes");
        assert_eq!(std::fs::metadata(m.p("sparse")).unwrap().blocks(), 16);
    }
    // a copy of it (cp, so copy_file_range) is just as sparse; so is a full file
    ok(Command::new("cp").arg(&sparse).arg(a.p("copy")));
    assert_eq!(std::fs::metadata(a.p("copy")).unwrap().blocks(), 16);
    write_file(&a.p("full"), &pattern(1, 3 * MIB as usize + 1));
    assert_eq!(
        std::fs::metadata(a.p("full")).unwrap().blocks(),
        (3 * MIB + 4096) / 512
    );
    // truncating into the data drops what lay past the end
    ok(Command::new("truncate").args(["-s", "100M"]).arg(&sparse));
    assert_eq!(std::fs::metadata(&sparse).unwrap().blocks(), 0);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
