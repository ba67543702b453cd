//! The largest file a mount keeps (2^57 - 1 bytes: its last byte in chunk
//! 2^31 - 1 of 64 MiB), as a program meets it: a write, truncate, fallocate or copy_file_range
//! past it answers EFBIG as ext4 does past 16 TiB, a write across it is
//! short, and nothing lands anywhere else (a write at 2^58 once landed at
//! byte 0, one at 2^57 was lost after fsync said EINVAL and close said 0).
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;

use jfs_e2e::Volume;
use rustix::fs::{copy_file_range, fallocate, FallocateFlags};
use rustix::io::Errno;

/// The largest file size: writes end at or before it.
const MAX_FILE_SIZE: u64 = (1 << 57) - 1;

fn errno<T>(r: std::io::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

#[test]
fn writes_past_the_largest_file_size_answer_efbig_and_move_no_byte() {
    let v = Volume::new("file-limits-write");
    let m = v.mount("a", &[]);
    let path = m.p("hello");
    std::fs::write(&path, b"HELLO-WORLD").unwrap();

    let f = OpenOptions::new().write(true).open(&path).unwrap();
    for offset in [
        1u64 << 58,
        MAX_FILE_SIZE,
        1 << 62,
        // (at 2^63 - 1 the kernel answers EINVAL itself: the end of the
        // range would not fit an loff_t, as on any file system)
        (1 << 63) - 2,
        MAX_FILE_SIZE + (64 << 20),
        1 << 57,
    ] {
        assert_eq!(
            errno(f.write_at(b"Z", offset)),
            libc::EFBIG,
            "a write at {offset}"
        );
    }
    f.sync_all()
        .expect("fsync after refused writes: nothing was accepted");
    drop(f);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"HELLO-WORLD",
        "no byte moved"
    );

    // a write across the limit is short: what fits is written
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    assert_eq!(f.write_at(b"XYZ", MAX_FILE_SIZE - 2).unwrap(), 2);
    f.sync_all().expect("fsync of the short write");
    drop(f);
    let f = File::open(&path).unwrap();
    assert_eq!(f.metadata().unwrap().len(), MAX_FILE_SIZE);
    let mut tail = [0u8; 4];
    assert_eq!(f.read_at(&mut tail, MAX_FILE_SIZE - 4).unwrap(), 4);
    assert_eq!(&tail, b"\0\0XY");
    let mut head = [0u8; 11];
    f.read_exact_at(&mut head, 0).unwrap();
    assert_eq!(&head, b"HELLO-WORLD");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn truncate_fallocate_and_copy_past_the_largest_file_size_answer_efbig() {
    let v = Volume::new("file-limits-size");
    let m = v.mount("a", &[]);
    std::fs::write(m.p("src"), b"source bytes").unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.p("dst"))
        .unwrap();
    assert_eq!(errno(f.set_len(MAX_FILE_SIZE + 1)), libc::EFBIG, "truncate");
    assert_eq!(errno(f.set_len(1 << 62)), libc::EFBIG, "truncate to 2^62");
    assert_eq!(
        fallocate(&f, FallocateFlags::empty(), MAX_FILE_SIZE, 4096),
        Err(Errno::FBIG),
        "fallocate at the limit"
    );
    let src = File::open(m.p("src")).unwrap();
    let (mut off_in, mut off_out) = (0u64, 1u64 << 58);
    assert_eq!(
        copy_file_range(&src, Some(&mut off_in), &f, Some(&mut off_out), 12),
        Err(Errno::FBIG),
        "copy_file_range to 2^58"
    );
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(std::fs::metadata(m.p("dst")).unwrap().len(), 0);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
