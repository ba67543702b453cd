//! Unit tests of the write buffers.
use super::*;

fn pending(chunk: u32, pos: u32, len: u32, next_block: u32) -> PendingSlice {
    let mut tail = BlockBuf::default();
    let buffered = len - next_block * 4096;
    tail.put(0, &vec![0u8; buffered as usize], 4096);
    PendingSlice {
        chunk,
        pos,
        len,
        id: 1,
        next_block,
        tail,
        uploads: Vec::new(),
        failed: Vec::new(),
        broken: false,
        sealed: false,
        inline: None,
    }
}

#[test]
fn a_write_goes_into_the_newest_pending_slice_it_lands_on_unless_shadowed() {
    const BS: u32 = 4096;
    let mut w = Writer::default();
    w.slices.push(pending(0, 0, 3000, 0)); // [0, 3000)
    w.slices.push(pending(0, 10_000, 100, 0)); // [10000, 10100)
    w.slices.push(pending(1, 0, 100, 0)); // another chunk
                                          // over a slice, inside it, right after it
    assert_eq!(w.writable_slice(0, 100, 10, BS), Some(0));
    assert_eq!(w.writable_slice(0, 3000, 10, BS), Some(0));
    assert_eq!(w.writable_slice(0, 10_050, 500, BS), Some(1));
    assert_eq!(w.writable_slice(1, 50, 10, BS), Some(2));
    // a gap: a new slice
    assert_eq!(w.writable_slice(0, 5000, 10, BS), None);
    // slice 0 would take a write that slice 1 (newer) overlaps: no
    assert_eq!(w.writable_slice(0, 2900, 7200, BS), None);
    // bytes already uploading (its first block) cannot change
    w.slices.push(pending(0, 20_000, 5000, 1)); // block 0 of it uploading
    assert_eq!(w.writable_slice(0, 20_100, 10, BS), None);
    assert_eq!(w.writable_slice(0, 24_100, 10, BS), Some(3));
    // sealed (a flush began): nothing more goes in
    w.slices[0].sealed = true;
    assert_eq!(w.writable_slice(0, 100, 10, BS), None);
}

#[test]
fn a_full_store_is_enospc_and_other_failures_eio() {
    let full = io::Error::from_raw_os_error(libc::ENOSPC);
    assert_eq!(store_errno(&full), libc::ENOSPC);
    let wrapped = io::Error::new(io::ErrorKind::StorageFull, "bucket full");
    assert_eq!(store_errno(&wrapped), libc::ENOSPC);
    assert_eq!(
        store_errno(&io::Error::from_raw_os_error(libc::EDQUOT)),
        libc::EDQUOT
    );
    assert_eq!(store_errno(&io::Error::other("timeout")), libc::EIO);
}

#[test]
fn deferred_changes_merge_in_order_and_show_on_the_attributes() {
    let mut w = Writer::default();
    let base = Attr {
        inode: 5,
        kind: crate::meta::NodeType::File,
        mode: 0o600,
        uid: 1,
        gid: 2,
        atime: 10,
        mtime: 20,
        ctime: 30,
        nlink: 1,
        length: 100,
        rdev: 0,
        parent: 1,
        tier: 0,
        used: 100,
    };
    assert!(w.is_empty());
    let same = w.show_deferred(base.clone());
    assert_eq!((same.mode, same.mtime, same.ctime), (0o600, 20, 30));
    w.defer_attrs(
        &SetAttr {
            mode: Some(0o100644),
            mtime: Some(TimeSet::At(7)),
            ..SetAttr::default()
        },
        0o600,
    );
    w.defer_attrs(
        &SetAttr {
            mode: Some(0o4755),
            atime: Some(TimeSet::Now),
            ..SetAttr::default()
        },
        0o644,
    );
    assert!(
        !w.is_empty() && !w.has_slices(),
        "a change waits without slices"
    );
    let change = w.deferred_attrs().unwrap();
    assert_eq!(change.mode, Some(0o4755), "the later mode wins");
    assert!(
        matches!(change.mtime, Some(TimeSet::At(7))),
        "the earlier mtime stays"
    );
    let shown = w.show_deferred(base.clone());
    assert_eq!((shown.mode, shown.uid, shown.gid), (0o4755, 1, 2));
    assert_eq!(shown.mtime, 7);
    assert_eq!(shown.atime, w.attrs_at);
    assert!(shown.ctime >= w.attrs_at && shown.length == 100);
}
