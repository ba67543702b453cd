//! Who may ask what of the control file: each request is checked as the system calls it stands for would be.
//!
//! The control file is open to every local user of an `--allow-other`
//! mount, and its requests name inodes, so each one is checked for the
//! uid, gid and supplementary groups of the process that wrote it: `rmr`
//! as `rm -rf` would (read, write and search on every directory it removes
//! from, the sticky bit's rules; what it may not remove is left and
//! reported), `clone` as `cp -r` (read on every source
//! file, read and search on every source directory, write and search on the
//! destination), `compact` write on its target, `info` search on the path.
//! An inode outside the mount's `--subdir` is refused for everyone.
//! (Permission bits only: an ACL that grants more is not consulted, so
//! such a request is refused; a named entry that denies less than the
//! class bits would is a known gap.)

use super::control::Caller;
use super::Vfs;
use crate::meta::{
    AclEntry, Attr, NodeType, TAG_GROUP, TAG_GROUP_OBJ, TAG_MASK, TAG_OTHER, TAG_USER,
};

/// read, write, search (execute) bits.
pub(super) const READ: u32 = 4;
pub(super) const WRITE: u32 = 2;
pub(super) const SEARCH: u32 = 1;

/// Entries read per page when a tree is checked.
const PAGE: i32 = 1000;

/// What a caller may remove of a tree.
#[derive(Debug)]
pub(super) enum Removable {
    /// All of it.
    Whole,
    /// Some of it.
    Part(Part),
}

/// The part of a tree a caller may remove.
#[derive(Debug)]
pub(super) struct Part {
    /// Entries (directory, name) it may remove whole.
    pub whole: Vec<(u64, Vec<u8>)>,
    /// How many entries it may not remove (left, with what leads to them).
    pub refused: u64,
    /// The first of them, for the answer.
    pub first_refused: String,
}

impl Part {
    fn merge(&mut self, other: Part) {
        self.whole.extend(other.whole);
        self.refused += other.refused;
    }
}

/// The writer of a control request, with its supplementary groups.
#[derive(Debug, Clone)]
pub(super) struct Requester {
    pub uid: u32,
    pub gid: u32,
    groups: Vec<u32>,
}

impl Requester {
    /// The writer of a request: its groups from `/proc/PID/status` (none if
    /// the process is gone: fewer rights, never more).
    pub fn of(caller: Caller) -> Requester {
        let status = std::fs::read_to_string(format!("/proc/{}/status", caller.pid));
        let groups = status
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                    g.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
            })
            .unwrap_or_default();
        Requester {
            uid: caller.uid,
            gid: caller.gid,
            groups,
        }
    }

    /// A request acting as `uid`/`gid` alone (a squashed one: see `squash`).
    pub fn acting_as(uid: u32, gid: u32) -> Requester {
        Requester::with_groups(uid, gid, Vec::new())
    }

    /// A request acting as `uid`/`gid` with supplementary groups `groups`.
    pub fn with_groups(uid: u32, gid: u32, groups: Vec<u32>) -> Requester {
        Requester { uid, gid, groups }
    }

    /// Whether `gid` is its group or one of its supplementary groups.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Whether it is in group `gid` (its own or a supplementary one) or is
    /// root: what the kernel's `in_group_or_capable` asks before it lets a
    /// chmod, or an ACL that sets the mode, keep the setgid bit.
    pub fn in_group_or_root(&self, gid: u32) -> bool {
        self.is_root() || self.in_group(gid)
    }

    /// Whether it has all of `want` on a node with `attr` whose access ACL
    /// is `acl` (as `jfs.get_acl` gives it, the owner, mask and other
    /// entries from the mode), by POSIX.1e's algorithm as Linux applies it
    /// (`posix_acl_permission`): root always; the owner by its entry; a
    /// named user by its entry within the mask; then the owning group and
    /// named groups it is in, within the mask: any one granting all of
    /// `want` grants, and being in one that does not refuses; then other.
    pub fn acl_allows(&self, attr: &Attr, acl: &[AclEntry], want: u32) -> bool {
        if self.is_root() || self.uid == attr.uid {
            return self.may(attr, want);
        }
        let perm = |tag: u16| acl.iter().find(|e| e.tag == tag).map(|e| e.perm as u32);
        let mask = perm(TAG_MASK).unwrap_or(7);
        let grants = |p: u32| p & mask & want == want;
        if let Some(e) = acl
            .iter()
            .find(|e| e.tag == TAG_USER && e.id == Some(self.uid))
        {
            return grants(e.perm as u32);
        }
        let mut in_a_group = false;
        for e in acl {
            let member = match e.tag {
                TAG_GROUP_OBJ => self.in_group(attr.gid),
                TAG_GROUP => e.id.is_some_and(|g| self.in_group(g)),
                _ => false,
            };
            if member {
                if grants(e.perm as u32) {
                    return true;
                }
                in_a_group = true;
            }
        }
        !in_a_group && perm(TAG_OTHER).unwrap_or(attr.mode & 7) & want == want
    }

    /// Whether it has all of `want` on a node by its owner, group and
    /// other bits (root always).
    pub fn may(&self, attr: &Attr, want: u32) -> bool {
        let bits = if self.is_root() {
            return true;
        } else if self.uid == attr.uid {
            attr.mode >> 6
        } else if self.gid == attr.gid || self.groups.contains(&attr.gid) {
            attr.mode >> 3
        } else {
            attr.mode
        };
        bits & want == want
    }

    /// Whether the sticky bit's rule lets it remove or rename `entry` of
    /// `dir` (the directory not sticky, or it owns one of them, or root):
    /// the rule beside the permission check, which is the mode bits' or
    /// the ACL's.
    pub fn sticky_allows(&self, dir: &Attr, entry: &Attr) -> bool {
        dir.mode & 0o1000 == 0 || self.is_root() || self.uid == dir.uid || self.uid == entry.uid
    }
}

/// A refusal, as the answer's text.
fn denied(what: &str, inode: u64) -> String {
    format!(
        "{what} (inode {inode}): {}",
        std::io::Error::from_raw_os_error(libc::EACCES)
    )
}

pub(super) fn os_error(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

impl Vfs {
    /// Whether `who` has all of `want` on `attr`'s node: its access ACL
    /// decides where ACLs are on, its mode bits otherwise.
    async fn grants(&self, who: &Requester, attr: &Attr, want: u32) -> Result<bool, String> {
        self.allows(who, attr, want).await.map_err(os_error)
    }

    /// Whether `who` may remove or rename `entry` of directory `dir`: write
    /// and search on it (by its ACL), and the sticky bit's rule.
    async fn may_unlink_entry(
        &self,
        who: &Requester,
        dir: &Attr,
        entry: &Attr,
    ) -> Result<bool, String> {
        Ok(self.grants(who, dir, WRITE | SEARCH).await? && who.sticky_allows(dir, entry))
    }

    /// The attributes of `inode` if `who` can reach it: it lies in this
    /// mount's tree and `who` may search every directory above it (up to
    /// the mount's root).
    pub(super) async fn reach(&self, inode: u64, who: &Requester) -> Result<Attr, String> {
        let attr = self.getattr(inode).await.map_err(os_error)?;
        let mut at = attr.clone();
        while at.inode != self.config.root {
            if at.inode == 1 || at.parent == 0 || at.parent == at.inode {
                return Err(format!(
                    "inode {inode} is not in this mount's tree (--subdir): {}",
                    os_error(libc::EACCES)
                ));
            }
            at = self.getattr(at.parent).await.map_err(os_error)?;
            if !self.grants(who, &at, SEARCH).await? {
                return Err(denied("no search permission on a directory above", inode));
            }
        }
        Ok(attr)
    }

    /// The node a request names, if `who` can reach it: a directory by its
    /// inode (its place is known), anything else as an entry of its
    /// directory, "PARENT_INODE:NAME_IN_HEX" (inodes as the kernel numbers
    /// them), which needs search on that directory too.
    pub(super) async fn node(&self, token: &str, who: &Requester) -> Result<Attr, String> {
        let bad =
            || format!("bad node {token:?}: INODE of a directory, or PARENT_INODE:NAME_IN_HEX");
        let Some((parent, name)) = token.split_once(':') else {
            let inode = self.inode_of(token.parse().map_err(|_| bad())?);
            let attr = self.reach(inode, who).await?;
            if attr.kind != NodeType::Dir && !(who.is_root() && self.config.root == 1) {
                return Err(format!(
                    "inode {inode} is not a directory: name it as PARENT_INODE:NAME_IN_HEX \
                     (a jfs command older than this mount?)"
                ));
            }
            return Ok(attr);
        };
        let parent = self.inode_of(parent.parse().map_err(|_| bad())?);
        let name = super::control::hex(name).map_err(|_| bad())?;
        let dir = self.reach(parent, who).await?;
        if !self.grants(who, &dir, SEARCH).await? {
            return Err(denied("no search permission on the directory", parent));
        }
        let in_parent = self.ns.settle_dir(parent).await.map_err(os_error)?;
        self.ns
            .lookup_now(&in_parent, parent, &name)
            .await
            .map_err(|e| os_error(e.errno()))
    }

    /// What `who` may remove of entry `name` of `parent` and everything
    /// below it, as `rm -rf` would find out: every directory it removes
    /// from needs read, write and search (and, if sticky, to own the entry
    /// or the directory); what it may not remove is left.
    pub(super) async fn removable_tree(
        &self,
        parent: u64,
        name: &[u8],
        who: &Requester,
    ) -> Result<Removable, String> {
        let dir = self.reach(parent, who).await?;
        if !self.grants(who, &dir, SEARCH).await? {
            return Err(denied("no search permission on the directory", parent));
        }
        let in_parent = self.ns.settle_dir(parent).await.map_err(os_error)?;
        let top = self
            .ns
            .lookup_now(&in_parent, parent, name)
            .await
            .map_err(|e| os_error(e.errno()))?;
        if who.is_root() {
            return Ok(Removable::Whole);
        }
        self.removable(&dir, &top, name, who).await
    }

    /// [`Vfs::removable_tree`] for an entry whose directory's attributes
    /// are known.
    async fn removable(
        &self,
        dir: &Attr,
        entry: &Attr,
        name: &[u8],
        who: &Requester,
    ) -> Result<Removable, String> {
        let itself = self.may_unlink_entry(who, dir, entry).await?;
        let refused = || Part {
            whole: Vec::new(),
            refused: 1,
            first_refused: format!(
                "{:?} in directory inode {}",
                String::from_utf8_lossy(name),
                dir.inode
            ),
        };
        if entry.kind != NodeType::Dir || !self.grants(who, entry, READ | WRITE | SEARCH).await? {
            // (a directory it may not empty is left whole)
            return Ok(match itself && entry.kind != NodeType::Dir {
                true => Removable::Whole,
                false => Removable::Part(refused()),
            });
        }
        let mut whole_here = Vec::new();
        let mut part: Option<Part> = None;
        let mut cookie = 0;
        let listing = self.ns.settle_dir(entry.inode).await.map_err(os_error)?;
        loop {
            let page = self
                .ns
                .readdirplus(&listing, entry.inode, cookie, PAGE)
                .await
                .map_err(|e| os_error(e.errno()))?;
            for child in &page {
                match Box::pin(self.removable(entry, &child.attr, &child.name, who)).await? {
                    Removable::Whole => whole_here.push((entry.inode, child.name.clone())),
                    Removable::Part(p) => match part.as_mut() {
                        Some(acc) => acc.merge(p),
                        None => part = Some(p),
                    },
                }
            }
            match page.last() {
                Some(last) if page.len() == PAGE as usize => cookie = last.cookie,
                _ => break,
            }
        }
        let mut part = match (part, itself) {
            (None, true) => return Ok(Removable::Whole),
            (None, false) => Part {
                whole: Vec::new(),
                ..refused()
            },
            (Some(mut p), itself) => {
                if !itself {
                    p.refused += 1;
                }
                p
            }
        };
        part.whole.extend(whole_here);
        Ok(Removable::Part(part))
    }

    /// Checks that `who` may copy `src` and everything below it, as
    /// `cp -r` would need to, into directory `dst_parent`.
    pub(super) async fn may_clone(
        &self,
        source: Attr,
        dst_parent: u64,
        who: &Requester,
    ) -> Result<(), String> {
        let dir = self.reach(dst_parent, who).await?;
        if !self.grants(who, &dir, WRITE | SEARCH).await? {
            return Err(denied("may not make entries in the directory", dst_parent));
        }
        if !self.readable(who, &source).await? {
            return Err(denied("may not read", source.inode));
        }
        if who.is_root() || source.kind != NodeType::Dir {
            return Ok(());
        }
        self.all_readable(source, who).await
    }

    /// Whether `who` may read `attr`'s node as `cp -r` reads it: a
    /// directory listed and searched, a file read.
    async fn readable(&self, who: &Requester, attr: &Attr) -> Result<bool, String> {
        match attr.kind {
            NodeType::Dir => self.grants(who, attr, READ | SEARCH).await,
            NodeType::File => self.grants(who, attr, READ).await,
            _ => Ok(true),
        }
    }

    /// Checks that `who` may ask for a compaction of `attr`'s node: write on it.
    pub(super) async fn may_compact(&self, attr: &Attr, who: &Requester) -> Result<(), String> {
        match self.grants(who, attr, WRITE).await? {
            true => Ok(()),
            false => Err(denied("may not write", attr.inode)),
        }
    }

    /// Checks that `who` may read every entry below directory `top`.
    async fn all_readable(&self, top: Attr, who: &Requester) -> Result<(), String> {
        let mut dirs = vec![top];
        while let Some(dir) = dirs.pop() {
            let mut cookie = 0;
            let listing = self.ns.settle_dir(dir.inode).await.map_err(os_error)?;
            loop {
                let page = self
                    .ns
                    .readdirplus(&listing, dir.inode, cookie, PAGE)
                    .await
                    .map_err(|e| os_error(e.errno()))?;
                for entry in &page {
                    if !self.readable(who, &entry.attr).await? {
                        return Err(denied("may not read", entry.attr.inode));
                    }
                    if entry.attr.kind == NodeType::Dir {
                        dirs.push(entry.attr.clone());
                    }
                }
                match page.last() {
                    Some(last) if page.len() == PAGE as usize => cookie = last.cookie,
                    _ => break,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::TAG_USER_OBJ;

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
}
