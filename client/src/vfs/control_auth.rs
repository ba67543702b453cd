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

use std::fmt::Write as _;

use super::access::{Requester, READ, SEARCH, WRITE};
use super::Vfs;
use crate::meta::{Attr, NodeType};

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
        let name = hex(name).map_err(|_| bad())?;
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

/// Hex digits of bytes (how names and paths travel in answers).
pub(super) fn hex_encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Bytes from hex digits (names travel in hex: they may hold any byte but "/" and NUL).
pub(super) fn hex(s: &str) -> Result<Vec<u8>, ()> {
    if !s.len().is_multiple_of(2) {
        return Err(());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| ()))
        .collect()
}
