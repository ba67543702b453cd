//! Unit tests of the permission checks: squash, ACLs as the kernel evaluates them, groups.
use super::*;
use crate::meta::TAG_USER_OBJ;

#[test]
fn root_squash_maps_root_only_and_all_squash_everyone() {
    let root = Some(Squash {
        all: false,
        uid: 65534,
        gid: 65534,
    });
    let who = Who::of(root, 0, 0);
    assert_eq!((who.uid, who.gid, who.squashed), (65534, 65534, true));
    let who = Who::of(root, 1000, 1000);
    assert_eq!((who.uid, who.gid, who.squashed), (1000, 1000, false));
    let all = Some(Squash {
        all: true,
        uid: 1500,
        gid: 1500,
    });
    assert!(Who::of(all, 1000, 1000).squashed);
    assert!(!Who::of(all, 1500, 1500).squashed);
    assert!(!Who::of(None, 0, 0).squashed);
}

fn attr(mode: u32, uid: u32, gid: u32) -> Attr {
    Attr {
        inode: 9,
        mode: 0o100000 | mode,
        uid,
        gid,
        ..crate::vfs::control::control_attr()
    }
}

fn entry(tag: u16, id: Option<u32>, perm: u16) -> AclEntry {
    AclEntry { tag, id, perm }
}

/// The ACL `jfs.get_acl` gives for a file of mode `mode` (the mask is
/// its group bits) with `named` entries and owning group's `group` perm.
fn acl(mode: u32, group: u16, named: &[AclEntry]) -> Vec<AclEntry> {
    let mut v = vec![
        entry(TAG_USER_OBJ, None, (mode >> 6 & 7) as u16),
        entry(TAG_GROUP_OBJ, None, group),
        entry(TAG_MASK, None, (mode >> 3 & 7) as u16),
        entry(TAG_OTHER, None, (mode & 7) as u16),
    ];
    v.extend_from_slice(named);
    v.sort_by_key(|e| (e.tag, e.id));
    v
}

#[test]
fn a_named_user_entry_refuses_what_other_would_grant() {
    // 0644 with user:65534:--- (mask r--): nobody may not read
    let a = attr(0o644, 0, 0);
    let l = acl(0o644, 4, &[entry(TAG_USER, Some(65534), 0)]);
    let nobody = Requester::acting_as(65534, 65534);
    assert!(nobody.may(&a, READ), "the bits alone grant it");
    assert!(!nobody.acl_allows(&a, &l, READ));
    assert!(
        Requester::acting_as(1000, 1000).acl_allows(&a, &l, READ),
        "other reads"
    );
    assert!(Requester::acting_as(0, 0).acl_allows(&a, &l, WRITE), "root");
    assert!(Requester::acting_as(0, 0).acl_allows(&attr(0o600, 7, 7), &l, READ));
}

#[test]
fn named_entries_are_bounded_by_the_mask() {
    // 0640 (mask r--) with user:1000:rw-: 1000 reads, may not write
    let a = attr(0o640, 0, 0);
    let l = acl(0o640, 4, &[entry(TAG_USER, Some(1000), 6)]);
    let u = Requester::acting_as(1000, 1000);
    assert!(u.acl_allows(&a, &l, READ));
    assert!(!u.acl_allows(&a, &l, WRITE));
    assert!(!u.acl_allows(&a, &l, READ | WRITE));
}

#[test]
fn groups_count_by_supplementary_membership_and_a_matching_group_refuses() {
    // 0674 (mask rwx, other r--), group::--- and group:5000:rw-
    let a = attr(0o674, 0, 100);
    let l = acl(0o674, 0, &[entry(TAG_GROUP, Some(5000), 6)]);
    let plain = Requester::acting_as(1000, 1000);
    let in_5000 = Requester::with_groups(1000, 1000, vec![5000]);
    let in_owning = Requester::with_groups(1000, 1000, vec![100]);
    assert!(plain.acl_allows(&a, &l, READ), "other");
    assert!(!plain.acl_allows(&a, &l, WRITE));
    assert!(
        in_5000.acl_allows(&a, &l, READ | WRITE),
        "by the named group"
    );
    assert!(
        !in_owning.acl_allows(&a, &l, READ),
        "in the owning group (---): other's r-- is not consulted"
    );
    let both = Requester::with_groups(1000, 100, vec![5000]);
    assert!(
        both.acl_allows(&a, &l, WRITE),
        "any matching group that grants"
    );
    // the owner goes by the owner entry alone
    let owner = Requester::with_groups(0x1234, 5000, vec![]);
    let mine = attr(0o074, 0x1234, 100);
    assert!(!owner.acl_allows(
        &mine,
        &acl(0o074, 0, &[entry(TAG_GROUP, Some(5000), 6)]),
        READ
    ));
}

#[test]
fn supplementary_groups_count_for_the_bits_too() {
    let a = attr(0o640, 0, 5000);
    assert!(!Requester::acting_as(1000, 1000).may(&a, READ));
    assert!(Requester::with_groups(1000, 1000, vec![5000]).may(&a, READ));
}
