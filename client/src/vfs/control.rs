//! The control file: a hidden `.jfs.control` in the mount's root through which
//! commands run by `jfs` (info, rmr, clone, compact, warmup, summary, stats, debug) talk to the
//! mount that serves a path, without a META_URL. Write one request line, read the answer.
use std::fmt::Write as _;

use super::access::{Caller, Requester, READ};
use super::control_auth::{hex, os_error as os_text, Part, Removable};
use super::warmup::Warmup;
use super::{Compacted, Vfs};
use crate::meta::{Attr, NodeType};
use crate::volume::layout::{slice_blocks, CHUNK_SIZE};

/// Entries `jfs rmr` removes per transaction (jfs.rmr's limit).
const RMR_STEP: i32 = 100_000;

/// The control file's name in the root directory.
pub const CONTROL_NAME: &[u8] = b".jfs.control";
/// Its inode: far above any id the database hands out.
pub const CONTROL_INODE: u64 = 0x7FFF_FFFF_FFFF_0001;

/// The control file's attributes.
pub fn control_attr() -> Attr {
    Attr {
        inode: CONTROL_INODE,
        kind: NodeType::File,
        mode: 0o666,
        uid: 0,
        gid: 0,
        atime: 0,
        mtime: 0,
        ctime: 0,
        nlink: 1,
        length: 0,
        rdev: 0,
        parent: 1,
        tier: 0,
        used: 0,
    }
}

impl Vfs {
    /// Runs one request line and returns the answer (errors as text).
    /// Inodes in requests are the kernel's numbers (`st_ino` on the mount).
    pub(super) async fn control(&self, request: &str, caller: Caller) -> String {
        // the metrics change nothing: the caches stay (`jfs stats` asks every second)
        if request.trim() == "stats" {
            return crate::metrics::text();
        }
        if request.trim() == "debug" {
            // (other users of an --allow-other mount see its files, not its setup)
            let mount_user = nix::unistd::geteuid().as_raw();
            return match caller.uid == 0 || caller.uid == mount_user {
                true => self.debug_report().await,
                false => "error: debug: only root or the mount's own user may ask\n".to_string(),
            };
        }
        let who = self.requester(caller);
        // what a command reads or changes includes the unlinks answered here
        if let Err(e) = self.ns.settle_all().await {
            return format!("error: {}\n", std::io::Error::from_raw_os_error(e));
        }
        let mut words = request.split_whitespace();
        let answer = match (words.next(), words.next()) {
            (Some("info"), Some(node)) => match self.node(node, &who).await {
                Ok(attr) => self.info(attr).await,
                Err(e) => Err(e),
            },
            (Some("rmr"), Some(parent)) => match (parent.parse::<u64>(), words.next().map(hex)) {
                (Ok(parent), Some(Ok(name))) => {
                    self.rmr_step(self.inode_of(parent), &name, &who).await
                }
                _ => Err("usage: rmr PARENT_INODE NAME_IN_HEX".to_string()),
            },
            (Some("clone"), Some(src)) => {
                let dst_parent = words.next().map(str::parse::<u64>);
                let name = words.next().map(hex);
                let preserve = words.next() == Some("preserve");
                match (dst_parent, name) {
                    (Some(Ok(dst_parent)), Some(Ok(name))) => {
                        let dst_parent = self.inode_of(dst_parent);
                        self.clone_tree(src, dst_parent, &name, preserve, &who)
                            .await
                    }
                    _ => Err(
                        "usage: clone SRC_NODE DST_PARENT_INODE NAME_IN_HEX [preserve]".to_string(),
                    ),
                }
            }
            (Some("compact"), Some(node)) => self.compact_step(node, &who).await,
            (Some("warmup"), Some(node)) => {
                let what = match words.next() {
                    None | Some("fetch") => Some(Warmup::Fetch),
                    Some("evict") => Some(Warmup::Evict),
                    Some("check") => Some(Warmup::Check),
                    Some(_) => None,
                };
                let parallel = words.next().map_or(Ok(4), str::parse::<usize>);
                match (what, parallel) {
                    (Some(what), Ok(parallel)) => match self.node(node, &who).await {
                        Ok(attr) if attr.kind != NodeType::File => {
                            Err(format!("{node}: not a regular file"))
                        }
                        Ok(attr) if !who.may(&attr, READ) => {
                            Err(format!("{node}: no read permission"))
                        }
                        Ok(attr) => self.warmup_file(&attr, what, parallel).await,
                        Err(e) => Err(e),
                    },
                    _ => Err("usage: warmup NODE [fetch|evict|check] [PARALLEL]".to_string()),
                }
            }
            (Some("summary"), Some(node)) => match words.next().map_or(Ok(0), str::parse::<i32>) {
                Ok(depth) => match self.node(node, &who).await {
                    Ok(attr) => self.summary(&attr, depth, &who).await,
                    Err(e) => Err(e),
                },
                Err(_) => Err("usage: summary NODE [DEPTH]".to_string()),
            },
            _ => Err(format!(
                "unknown request {:?}; known: info NODE, rmr PARENT_INODE NAME_IN_HEX, \
                 clone SRC_NODE DST_PARENT_INODE NAME_IN_HEX [preserve], compact NODE, \
                 warmup NODE [fetch|evict|check] [PARALLEL], summary NODE [DEPTH], stats, debug \
                 (NODE: a directory's INODE, or PARENT_INODE:NAME_IN_HEX)",
                request.trim()
            )),
        };
        // rmr and clone change what the attribute cache holds (and a clone
        // adds names: see clone_tree); reads that started before are not kept
        self.ns.attrs.forget_all();
        match answer {
            Ok(text) => text,
            Err(e) => format!("error: {e}\n"),
        }
    }

    /// One step of compacting a tree: the fragmented chunks of the files at
    /// or below `root`, for about a second; answers "compacted CHUNKS
    /// SLICES remaining N" (N: fragmented chunks left).
    async fn compact_step(&self, node: &str, who: &Requester) -> Result<String, String> {
        let text = |e: i32| std::io::Error::from_raw_os_error(e).to_string();
        let attr = self.node(node, who).await?;
        self.may_compact(&attr, who).await?;
        let root = attr.inode;
        let fragmented = self
            .ns
            .meta_of(root)
            .fragmented_chunks(root, 2)
            .await
            .map_err(|e| text(e.errno()))?;
        let started = std::time::Instant::now();
        let (mut chunks, mut slices, mut tried, mut changed) = (0u64, 0u64, 0u64, 0u64);
        for &(inode, chunk, _) in &fragmented {
            if tried > 0 && started.elapsed() > std::time::Duration::from_secs(1) {
                break;
            }
            tried += 1;
            match self.compact(inode, chunk).await.map_err(text)? {
                Compacted::Done { slices: n } => {
                    chunks += 1;
                    slices += n as u64;
                }
                Compacted::Changed => changed += 1,
                // every slice lies past the end of the file: nothing to rewrite
                Compacted::Nothing => {}
            }
        }
        let remaining = fragmented.len() as u64 - tried + changed;
        Ok(format!(
            "compacted {chunks} {slices} remaining {remaining}\n"
        ))
    }

    /// One step of removing a tree (up to [`RMR_STEP`] entries, one transaction):
    /// answers "removed N done|more". On the last step the kernel forgets
    /// the entry so the mount shows the result at once.
    async fn rmr_step(&self, parent: u64, name: &[u8], who: &Requester) -> Result<String, String> {
        if self.config.read_only {
            return Err(std::io::Error::from_raw_os_error(libc::EROFS).to_string());
        }
        if let Removable::Part(part) = self.removable_tree(parent, name, who).await? {
            return self.remove_part(part).await;
        }
        let in_parent = self.ns.settle_dir(parent).await.map_err(os_text)?;
        let step = self.ns.rmr(&in_parent, parent, name, RMR_STEP).await;
        drop(in_parent);
        let (removed, done) = match step {
            Err(e) if e.errno() == libc::EXDEV => {
                let removed = self.remove_across_shards(parent, name).await;
                (removed.map_err(os_text)?, true)
            }
            step => step.map_err(|e| e.to_string())?,
        };
        if done {
            self.forget_entry(parent, name);
        }
        Ok(format!(
            "removed {removed} {}\n",
            if done { "done" } else { "more" }
        ))
    }

    /// Removes what a caller may remove of a tree that holds entries it may
    /// not (each removable subtree in steps of [`RMR_STEP`]), as `rm -rf`
    /// does: answers an error naming what was left.
    async fn remove_part(&self, part: Part) -> Result<String, String> {
        let mut removed = 0;
        for (dir, name) in &part.whole {
            let n = self
                .remove_across_shards(*dir, name)
                .await
                .map_err(|e| format!("removed {removed}, then: {}", os_text(e)))?;
            removed += n;
        }
        Err(format!(
            "removed {removed}; left {} entries it may not remove (the first: {}): {}",
            part.refused,
            part.first_refused,
            std::io::Error::from_raw_os_error(libc::EACCES)
        ))
    }

    /// Removes the tree at entry `name` of `parent` in steps of
    /// [`RMR_STEP`] (jfs.rmr); the entries removed. A tree that holds shard
    /// roots (or is one), which no one database can remove, goes an entry
    /// at a time, each subtree on its own shard, then its directory.
    async fn remove_across_shards(&self, parent: u64, name: &[u8]) -> Result<u64, i32> {
        let mut removed = 0;
        loop {
            let in_parent = self.ns.settle_dir(parent).await?;
            match self.ns.rmr(&in_parent, parent, name, RMR_STEP).await {
                Ok((n, false)) => removed += n,
                Ok((n, true)) => {
                    drop(in_parent);
                    self.forget_entry(parent, name);
                    return Ok(removed + n);
                }
                Err(e) if e.errno() == libc::EXDEV => break,
                Err(e) => return Err(e.errno()),
            }
        }
        let in_parent = self.ns.settle_dir(parent).await?;
        let top = self.ns.lookup_now(&in_parent, parent, name).await;
        drop(in_parent);
        let top = top.map_err(|e| e.errno())?;
        loop {
            let listing = self.ns.settle_dir(top.inode).await?;
            let page = self.ns.readdirplus(&listing, top.inode, 0, 1000).await;
            drop(listing);
            let page = page.map_err(|e| e.errno())?;
            if page.is_empty() {
                break;
            }
            for child in page {
                removed += Box::pin(self.remove_across_shards(top.inode, &child.name)).await?;
            }
        }
        let in_parent = self.ns.settle_dir(parent).await?;
        let gone = self.ns.rmdir(&in_parent, parent, name).await;
        drop(in_parent);
        gone.map_err(|e| e.errno())?;
        self.ns.listings.removed(parent, name);
        self.forget_entry(parent, name);
        Ok(removed + 1)
    }

    /// Clones `src` (a file or a tree) to the new entry `name` of `dst_parent`
    /// in one transaction: answers "cloned INODE NODES SPACE". The caller
    /// needs what `cp -r` would (see `control_auth`); the clone is owned by
    /// the caller unless root asks to preserve owners.
    async fn clone_tree(
        &self,
        src: &str,
        dst_parent: u64,
        name: &[u8],
        preserve: bool,
        who: &Requester,
    ) -> Result<String, String> {
        if self.config.read_only {
            return Err(std::io::Error::from_raw_os_error(libc::EROFS).to_string());
        }
        let source = self.node(src, who).await?;
        let src = source.inode;
        self.may_clone(source, dst_parent, who).await?;
        let owner = (!preserve || !who.is_root()).then_some((who.uid, who.gid));
        let in_parent = self.ns.settle_dir(dst_parent).await.map_err(os_text)?;
        let (inode, nodes, space) = self
            .ns
            .clone_node(&in_parent, src, dst_parent, name, owner)
            .await
            .map_err(|e| e.to_string())?;
        self.ns.listings.added(dst_parent, name);
        self.forget_entry(dst_parent, name);
        Ok(format!("cloned {inode} {nodes} {space}\n"))
    }

    /// Inode, type, length, and for files every chunk's slices and objects.
    async fn info(&self, attr: Attr) -> Result<String, String> {
        let inode = attr.inode;
        let mut out = String::new();
        let _ = writeln!(out, "inode: {}", attr.inode);
        let _ = writeln!(out, "type: {:?}", attr.kind);
        let _ = writeln!(out, "length: {}", attr.length);
        let _ = writeln!(out, "nlink: {}", attr.nlink);
        if attr.kind != NodeType::File {
            return Ok(out);
        }
        let chunks = attr.length.div_ceil(CHUNK_SIZE);
        let _ = writeln!(out, "chunks: {chunks}");
        let bs = self.volume.block_size;
        let mut objects = 0;
        for chunk in 0..chunks {
            let slices = self
                .ns
                .meta_of(inode)
                .read_chunk(inode, chunk as u32)
                .await
                .map_err(|e| e.to_string())?;
            for s in slices {
                let _ = writeln!(
                    out,
                    "  chunk {chunk} pos {} len {}: slice {} (size {}, from {}){}",
                    s.pos,
                    s.len,
                    s.id,
                    s.size,
                    s.off,
                    match (s.id, &s.inline) {
                        (0, _) => " hole".to_string(),
                        (_, Some(stored)) => format!(" in the database ({} bytes)", stored.len()),
                        _ => String::new(),
                    }
                );
                if s.id == 0 || s.inline.is_some() {
                    continue;
                }
                for (_, _, key) in slice_blocks(&self.volume.name, s.id, s.size, bs) {
                    let _ = writeln!(out, "    object {key}");
                    objects += 1;
                }
            }
        }
        let _ = writeln!(out, "objects: {objects}");
        Ok(out)
    }
}
